"""Errors of settings, options and URLs, and of what a journal or log recorded once for ever."""

from __future__ import annotations

from ordo.errors.root import OrdoError


class ConfigurationError(OrdoError, ValueError):
    """A setting, option or URL is invalid; the message names the key.

    `setting` is the settings field at fault, when there is one: settings loaded from the
    environment or a file put the variable or key it came from in front of the message.
    """

    def __init__(self, msg: str = "", *, setting: str | None = None) -> None:
        self.setting = setting
        super().__init__(msg)


class BucketSizeMismatchError(ConfigurationError):
    """The journal recorded another bucket size, which can never change afterwards.

    Recorded by `ordo init` with ORDO_BUCKET_SIZE set, or else by the first write: a journal
    just initialised may hold no event yet and still refuse another size.
    """

    def __init__(self, *, recorded: str, requested: str, advice: str = "") -> None:
        """`advice` says where the reader's bucket size is set (an option's name), if given."""
        self.recorded, self.requested, self.advice = recorded, requested, advice
        msg = (
            f"journal records bucket_size={recorded}, cannot open it with "
            f"bucket_size={requested} (the bucket size recorded by `ordo init` or the first "
            "write never changes)"
        )
        super().__init__(f"{msg}; {advice}" if advice else msg)

    def advised(self, advice: str) -> BucketSizeMismatchError:
        """The same error with `advice`.

        Only the caller knows where its reader's bucket size was set (an option, a variable, a
        flag); the library's message names the settings field.
        """
        return BucketSizeMismatchError(
            recorded=self.recorded, requested=self.requested, advice=advice
        )


class CheckpointMismatchError(ConfigurationError):
    """A streaming query's checkpoint was written by a query of another tag, processor or journal.

    Resuming would start the tag at the other query's position and skip what lies before it
    (for another processor: every event it has not applied yet). `what` is "tag", "processor"
    or "journal"; `checkpointed` is None when the checkpoint does not record it, and `evidence`
    then says how the mismatch shows (for a journal's id, which journal has the requested one).
    """

    def __init__(
        self, *, checkpointed: str | None, requested: str, what: str = "tag", evidence: str = ""
    ) -> None:
        self.checkpointed, self.requested, self.what = checkpointed, requested, what
        other = f"another {what}" if checkpointed is None else f"{what}={checkpointed!r}"
        shown = f"{requested!r} ({evidence})" if evidence else repr(requested)
        msg = (
            f"the checkpoint was written by a query of {other}, this query's {what} is "
            f"{shown}: give it a checkpointLocation of its own"
        )
        super().__init__(msg)


class MaterializerCheckpointError(ConfigurationError):
    """A CDC materializer ran from another checkpoint than the one that made its progress.

    The sink records the Spark streaming query that applied a materializer's batches, and a
    query's id stays with its checkpoint. A new checkpoint's query numbers its batches from 0
    again and folds from empty state: the sink would skip its batches up to the progress as
    replays, and the later ones would repeat messages (a CREATE for a row that has messages).
    `recorded` is the progress's query id (None: written before ordo recorded it), `requested`
    the checkpoint's (None: no query has run from it yet).

    The other way round, the checkpoint's query is at batch `checkpoint_batch`, past the one
    after the progress: `batch_id` is None when the sink has no progress of the materializer
    (the checkpoint was run under another name or into another sink, or the progress was
    deleted and the checkpoint kept), else the progress's batch, behind the checkpoint's (the
    sink was restored from an older copy). The query's fold state holds the changes of the
    batches in between, which the sink does not have: the table would lack the rows they made,
    and the messages go on with updates of rows the sink has no message of.
    """

    def __init__(
        self,
        *,
        materializer: str,
        batch_id: int | None,
        recorded: str | None,
        requested: str | None,
        checkpoint_batch: int = 0,
    ) -> None:
        self.materializer, self.batch_id = materializer, batch_id
        self.recorded, self.requested = recorded, requested
        self.checkpoint_batch = checkpoint_batch
        if batch_id is None:
            msg = (
                f"materializer {materializer!r} has no progress in the sink, but its checkpoint "
                f"(query {requested}) is at batch {checkpoint_batch}: the fold state holds the "
                f"changes of its batches 0 to {checkpoint_batch - 1}, which this sink never "
                "got; nothing was written. Run it with the --name and the sink it was run "
                "with, or start over with a new checkpoint (and, for this name, the "
                "materialized table and --messages emptied), which materializes the change "
                "log from its beginning"
            )
            super().__init__(msg)
            return
        if checkpoint_batch > batch_id + 1:
            msg = (
                f"materializer {materializer!r} has progress in the sink up to batch "
                f"{batch_id}, but its checkpoint (query {requested}) is at batch "
                f"{checkpoint_batch}: the fold state holds the changes of its batches "
                f"{batch_id + 1} to {checkpoint_batch - 1}, which this sink does not have (was "
                "it restored from an older copy?); nothing was written. Run it with the sink as "
                "that query left it, or start over under another --name and another "
                "--target-table with a new checkpoint, which materializes the change log from "
                "its beginning"
            )
            super().__init__(msg)
            return
        made = "before ordo recorded its query" if recorded is None else f"by query {recorded}"
        this = "is new" if requested is None else f"is query {requested}'s"
        msg = (
            f"materializer {materializer!r} was run from another checkpoint: its progress in "
            f"the sink (batch {batch_id}) was made {made}, this checkpoint {this}; nothing was "
            "written. Run it with the checkpoint it was run from, or start over under another "
            "--name and another --target-table (name=, target_table=; the table's default "
            "does not follow the name), which materializes the change log from its beginning"
        )
        super().__init__(msg)


class PartitionCountMismatchError(ConfigurationError):
    """A table's change log was written with another number of partitions, which cannot change.

    Every change of a key must be in one partition, in order, where the publisher's
    deduplication reads the positions already published: another count would route a key to
    another partition. `recorded` is the log's count; None for a log written before ordo
    recorded counts, whose files do not fit `requested` (`stray` is a partition key and the
    partition it is in).
    """

    def __init__(
        self,
        *,
        table: str,
        recorded: int | None,
        requested: int,
        stray: tuple[str, int] | None = None,
    ) -> None:
        self.table, self.recorded, self.requested = table, recorded, requested
        if recorded is not None:
            msg = (
                f"table {table!r}: its change log has {recorded} partitions, a publish with "
                f"{requested} is refused (a key's changes must stay in one partition): use "
                f"--partitions {recorded} (partitions={recorded}), or leave it out to follow "
                "the log; nothing was published"
            )
        else:
            where = (
                "" if stray is None else f" (partition key {stray[0]} is in partition={stray[1]})"
            )
            msg = (
                f"table {table!r}: its change log was written before ordo recorded partition "
                f"counts and its files do not fit {requested} partitions{where}: use "
                "--partitions (partitions=) with the count it was written with; nothing was "
                "published"
            )
        super().__init__(msg)


class SparkMasterUnreachableError(ConfigurationError):
    """Spark did not start: the cluster manager `--master` names could not be reached.

    A configuration error because the URL is what is usually wrong (a misspelt host or port);
    a master that is down or behind a firewall is told the same way. `cause` is the network
    error Spark saw (`UnknownHostException: nohost`), `output` the file of Spark's own output,
    which holds every attempt.
    """

    def __init__(self, *, master: str, cause: str, output: str) -> None:
        self.master, self.cause, self.output = master, cause, output
        msg = (
            f"Spark could not reach its master {master} ({cause}): check the host and port in "
            "--master, and that the master is running and can be reached from this machine "
            f"(Spark's output: {output})"
        )
        super().__init__(msg)


class NoSparkExecutorError(ConfigurationError):
    """Spark started on a cluster, but its master gave the job no executor within a bound.

    A standalone master with no workers, or none with the free cores and memory the job asks
    for, accepts the job and leaves it waiting for ever without a word: Spark's warning ("Initial
    job has not accepted any resources") is below the level ordo's sessions log at. A
    configuration error because what is wrong is the cluster or what the job asks of it, as for
    SparkMasterUnreachableError.
    `timeout_ms` is the bound (--executor-timeout-ms), `output` the file of Spark's own output.
    """

    def __init__(self, *, master: str, timeout_ms: int, output: str) -> None:
        self.master, self.timeout_ms, self.output = master, timeout_ms, output
        msg = (
            f"Spark's master {master} started no executor for the job within "
            f"{timeout_ms / 1000:g} s: check that the cluster has workers registered (a "
            "standalone master's web UI lists them) with the free cores and memory the job asks "
            "for (spark.executor.cores, spark.executor.memory), or allow longer with "
            f"--executor-timeout-ms (Spark's output: {output})"
        )
        super().__init__(msg)


class ClassArchiveError(ConfigurationError):
    """Spark's class-data archive could not be made (`ordo spark archive`).

    No Java or pyspark to make it for, a folder it cannot be written to, JVM options of the
    user's own that choose class-data sharing already, or a warm-up start of Spark that failed
    or took too long. A configuration error as a Spark that does not start is one: what is
    wrong is the machine's setup, and the message names the part. Starts never raise it: they
    run without an archive.
    """


class UnknownUrlSchemeError(ConfigurationError):
    """A journal URL names a backend ordo does not have."""
