package ordo.hadoop;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * Hadoop's local file system (checksum files included) over ForklessRawLocalFileSystem: the
 * value of {@code fs.file.impl}. A LocalFileSystem still, as Spark's RocksDB state store casts
 * the local file system to one.
 */
public class ForklessLocalFileSystem extends LocalFileSystem {
  public ForklessLocalFileSystem() {
    super(new ForklessRawLocalFileSystem());
  }
}
