package ordo.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local file system, with the two calls that start a process done in Java.
 *
 * <p>Without Hadoop's native library (pyspark ships none), RawLocalFileSystem sets a file's
 * permissions by running {@code chmod} (every file and folder it creates) and asks whether a
 * path is a symbolic link by running {@code readlink} (every rename through a FileContext): some
 * 5 ms a process, a few dozen of them per micro-batch of a streaming query's checkpoint and
 * state store. Everything else is Hadoop's own.
 */
public class ForklessRawLocalFileSystem extends RawLocalFileSystem {
  /** The permission bits from the lowest (others' execute) up, as FsPermission.toShort() has them. */
  private static final PosixFilePermission[] BITS = {
    PosixFilePermission.OTHERS_EXECUTE,
    PosixFilePermission.OTHERS_WRITE,
    PosixFilePermission.OTHERS_READ,
    PosixFilePermission.GROUP_EXECUTE,
    PosixFilePermission.GROUP_WRITE,
    PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE,
    PosixFilePermission.OWNER_WRITE,
    PosixFilePermission.OWNER_READ,
  };

  /** The read, write and execute bits through java.nio; a sticky bit still through Hadoop. */
  @Override
  public void setPermission(Path path, FsPermission permission) throws IOException {
    int mode = permission.toShort();
    if ((mode & ~0777) != 0) {
      super.setPermission(path, permission);
      return;
    }
    Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
    for (int i = 0; i < BITS.length; i++) {
      if ((mode & (1 << i)) != 0) {
        bits.add(BITS[i]);
      }
    }
    Files.setPosixFilePermissions(pathToFile(path).toPath(), bits);
  }

  /**
   * A path that is no symbolic link has the status getFileStatus gives it (as Hadoop's own
   * answer is once readlink found no link); a link still gets Hadoop's answer.
   */
  @Override
  public FileStatus getFileLinkStatus(Path path) throws IOException {
    if (Files.isSymbolicLink(pathToFile(path).toPath())) {
      return super.getFileLinkStatus(path);
    }
    return getFileStatus(path);
  }
}
