"""``stream``: the ``apply`` pipeline as a Spark Structured Streaming query over a landing directory.

The streaming source only *discovers* files: a ``binaryFile`` stream over the landing directory,
of which only the ``path`` column is selected, so Spark lists new files and never reads their
contents (the plan's ``ReadSchema`` is ``struct<path:string>``). Each micro-batch hands its
file names to ``foreachBatch``, which calls :func:`lakecdc.apply` on exactly those files: decoding,
consolidation, quarantine, the ledger and the summary are the one pipeline ``apply`` runs.

Exactly once, twice over:

* Spark's checkpoint (``<target>/_lakecdc/stream-checkpoint`` by default) remembers which files
  each batch held and which batches committed; a restart goes on from there;
* lakecdc's ledger (``<target>/_lakecdc/runs``) remembers every file applied. When Spark replays
  a batch (a crash after the MERGE, before the checkpoint's commit), ``apply`` finds its files in
  the ledger and applies nothing; a batch interrupted inside ``apply`` is resumed on exactly its
  files. Even a lost checkpoint only costs a re-listing: every file already applied is skipped.

A batch in which a table failed (``summary.ok`` is False) stops the query with
:class:`BatchFailed`; the batch is not committed to the checkpoint, so the next start runs it
again, and ``apply`` resumes the unfinished run on its files (fix the cause first, e.g. a key).

Each batch's ``apply`` holds the target's lease (:mod:`lakecdc.lake.lease`) while it runs: between
batches, a ``maintain``, ``check`` or ``apply`` of another process can take its turn, and a batch
that meets one of them stops the query with :class:`~lakecdc.lake.lease.TargetBusy` unless the stream
was given ``wait=`` seconds (``--wait``) to wait for it.

On a Spark Connect session, Spark runs ``foreachBatch``'s function in a Python process of the
server (:class:`_ServerBatch`), with the batch's own session: each batch's ``apply`` runs there, and
leaves its files and summary in ``<target>/_lakecdc/stream-batches/`` for the :class:`ChangeStream`
of the client, which reads them (and calls ``on_batch`` and ``progress``) when it is waited on or
asked for its total. The landing directory, target and checkpoint must then be paths the server
sees as the client does (a shared volume, or the same machine).

Files must appear whole in the landing directory (write elsewhere or under a ``.``/``_`` name,
then rename), as for any Spark file stream: a file is taken once, as it is when listed. Lines a
writer appends to a file after that are not seen by the stream (``apply`` over the directory
applies them; ``min_file_age`` is ``apply``'s answer to writers that append in place).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fnmatch
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakecdc.check.contracts import load_contracts
from lakecdc.config import arguments as A
from lakecdc.config.durations import parse_trigger
from lakecdc.config.settings import DEFAULT_TRIGGER, Settings
from lakecdc.decode import get_decoder
from lakecdc.errors import ConfigError, InputNotFoundError, LakecdcError
from lakecdc.lake.ledger import Ledger, list_inputs
from lakecdc.lake.summary import RunSummary, combine_summaries
from lakecdc.run.apply import apply
from lakecdc.run.kafka import (
    CHECKPOINT,
    DEFAULT_LANDING,
    Kafka,
    Lander,
    framing_of,
    kafka_stream,
    remove_unfinished,
)
from lakecdc.spark.compat import is_spark_connect
from lakecdc.spark.session import get_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

Progress = Callable[[str], None]

#: The checkpoint of a target's stream, unless ``checkpoint=`` says otherwise.
DEFAULT_CHECKPOINT = Path("_lakecdc") / "stream-checkpoint"

#: Where the batches of a stream on Spark Connect leave their records for the client, one
#: directory per started query.
CONNECT_BATCHES = Path("_lakecdc") / "stream-batches"

#: Spark's ``maxFileAge`` for the landing directory: in practice, never.
MAX_FILE_AGE = "36500d"

#: The settings a stream passes on to every batch's ``apply`` (all but ``reapply``, which names
#: files an earlier run applied: give it to ``apply``).
APPLY_SETTINGS: tuple[str, ...] = tuple(name for name in Settings.names() if name != "reapply")

# apply sets session settings for its duration (lakecdc.spark.conf.job_conf), and a target has one
# writer at a time (lakecdc.lake.lease): batches of all the streams of this process apply one at a time.
_APPLY_LOCK = threading.Lock()

@dataclass(frozen=True)
class StreamBatch:
    """One micro-batch: its Spark batch id, the files it held and what ``apply`` did with them."""

    batch_id: int
    files: tuple[str, ...]
    summary: RunSummary
    #: everything the query applied since it started, this batch included
    total: RunSummary


class BatchFailed(LakecdcError):
    """A table of a batch failed; the other tables were applied, the batch was not committed."""

    def __init__(self, batch: StreamBatch) -> None:
        self.batch = batch
        errors = "; ".join(f"{t.source_table}: {t.error}" for t in batch.summary.tables if t.error)
        super().__init__(
            f"batch {batch.batch_id} ({len(batch.files)} file(s)): {errors or 'a table failed'}; the other "
            "tables were applied. The stream stopped before committing the batch: fix the cause and start "
            "it again, it resumes the batch on the same files (nothing is applied twice)"
        )


class ChangeStream:
    """A running :func:`stream`: the Spark query, its last batch and the total so far.

    Use it as a context manager to stop the query on the way out::

        with lakecdc.stream("landing/", "lake/", trigger="10 seconds") as s:
            s.await_termination()
    """

    def __init__(self, *, target: str, format: str) -> None:
        self.target = target
        self.format = format
        self.query: StreamingQuery | None = None
        #: the last batch that ran (None before the first)
        self.last_batch: StreamBatch | None = None
        #: how many batches ran since the query started
        self.batches = 0
        self._total: RunSummary | None = None
        self._error: BaseException | None = None
        # Spark Connect: the directory the server's batches leave their records in, and the
        # client's callbacks that see them
        self._records: Path | None = None
        self._on_batch: Callable[[StreamBatch], None] | None = None
        self._say: Progress = lambda _msg: None

    @property
    def total(self) -> RunSummary:
        """Everything this query applied so far, as one summary (the tables' counts added up)."""
        self._sync()
        return self._total or RunSummary(target=self.target, format=self.format)

    @property
    def is_active(self) -> bool:
        return self.query is not None and self.query.isActive

    def await_termination(self, timeout: float | None = None) -> bool | None:
        """Wait until the query stops (an available-now or once query stops by itself).

        Raises the batch's own error (:class:`BatchFailed`, :class:`~lakecdc.PrimaryKeyUpdateError`,
        ...) when a batch failed and stopped the query.
        """
        with self._errors():
            # (PySpark's annotation says int; it takes a float of seconds as well)
            return self._spark_query().awaitTermination(timeout)  # type: ignore[arg-type]

    def process_all_available(self) -> None:
        """Block until every file in the landing directory now has been applied (tests, notebooks)."""
        with self._errors():
            self._spark_query().processAllAvailable()

    def stop(self) -> None:
        """Stop the query (call it between batches; an interrupted batch is resumed by the next start)."""
        if self.query is not None:
            self.query.stop()
        self._sync()

    def __enter__(self) -> ChangeStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spark_query(self) -> StreamingQuery:
        if self.query is None:
            raise LakecdcError("the stream has not started")
        return self.query

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Raise the batch's own error rather than Spark's StreamingQueryException around it."""
        from pyspark.errors import StreamingQueryException

        try:
            yield
        except StreamingQueryException as exc:
            self._sync()
            if self._error is not None:
                raise self._error from exc
            raise
        self._sync()

    def _sync(self) -> None:
        """On Spark Connect: take in the records the server's batches left since the last call, in
        batch order (each one's summary counted, ``progress`` told, ``on_batch`` called, a failed
        one's error kept for :meth:`await_termination`); the directory goes once the query stopped."""
        if self._records is None:
            return
        for path in sorted(self._records.glob("*.json")):
            record = json.loads(path.read_text())
            path.unlink()
            batch_id, files = int(record["batch_id"]), list(record["files"])
            if record.get("error"):
                self._say(f"batch {batch_id}: {len(files)} file(s): {record['error']}")
                self._error = LakecdcError(f"batch {batch_id} ({len(files)} file(s)): {record['error']}")
                continue
            batch = self._record(batch_id, files, RunSummary.from_dict(record["summary"]))
            self._say(f"batch {batch_id}: {len(files)} file(s) applied")
            if not batch.summary.ok:
                self._error = BatchFailed(batch)
            if self._on_batch is not None:
                self._on_batch(batch)
        if self.query is not None and not self.query.isActive:
            shutil.rmtree(self._records, ignore_errors=True)
            self._records = None

    def _record(self, batch_id: int, files: list[str], s: RunSummary) -> StreamBatch:
        before = self._total
        self._total = s if before is None else combine_summaries(
            [before, s], target=s.target, fmt=s.format, engine=s.engine, seconds=before.seconds + s.seconds,
        )
        self.last_batch = StreamBatch(batch_id, tuple(files), s, self._total)
        self.batches += 1
        return self.last_batch


@dataclass(frozen=True)
class _Files:
    """A stream's input: the files landing in a directory (Spark's file source lists them)."""

    landing: Path
    max_files: int | None
    glob_filter: str | None

    def describe(self) -> str:
        return str(self.landing)

    def records(self, spark: SparkSession) -> DataFrame:
        return _file_stream(spark, self.landing, self.max_files, self.glob_filter)

    def files(self, batch_df: DataFrame, batch_id: int, target: str) -> list[str]:
        """The files of a micro-batch, as ``apply`` takes them."""
        files = sorted({_local_path(row[0]) for row in batch_df.collect()})
        if files and self.max_files is not None:
            files = _in_name_order(files, self.landing, target, self.glob_filter)
        return files


@dataclass(frozen=True)
class _Topics:
    """A stream's input: Kafka topics, each batch of records landed as files
    (:mod:`lakecdc.run.kafka`) before ``apply`` takes them."""

    kafka: Kafka
    landing: Path
    framing: str

    def describe(self) -> str:
        return f"Kafka {self.kafka.describe()}"

    def records(self, spark: SparkSession) -> DataFrame:
        return kafka_stream(spark, self.kafka)

    def files(self, batch_df: DataFrame, batch_id: int, target: str) -> list[str]:
        """Every landed file (the ledger leaves out those applied already), once the batch landed;
        none when the batch held no record."""
        landed = Lander(str(self.landing), self.framing).land(batch_df, batch_id)
        return list_inputs([self.landing]) if landed.directory is not None else []


_Source = _Files | _Topics


@dataclass(frozen=True)
class _ServerBatch:
    """``foreachBatch``'s function on Spark Connect. Spark pickles it and runs it in a Python
    process of the server, so it holds settings only (no session, lock or callback): it applies a
    batch with the batch's own session, then leaves a record of it (files and summary, or the
    error) in ``records`` for the client's :class:`ChangeStream`."""

    source: _Source
    target: str
    settings: Settings
    records: str

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        files = self.source.files(batch_df, batch_id, self.target)
        if not files:
            return
        record: dict[str, Any] = {"batch_id": batch_id, "files": files}
        try:
            summary = apply(files, self.target, settings=self.settings, spark=batch_df.sparkSession)
        except BaseException as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"
            self._leave(batch_id, record)
            raise
        record["summary"] = summary.to_dict()
        self._leave(batch_id, record)
        if not summary.ok:
            raise BatchFailed(StreamBatch(batch_id, tuple(files), summary, summary))

    def _leave(self, batch_id: int, record: dict[str, Any]) -> None:
        out = Path(self.records) / f"{batch_id:012d}.json"
        part = out.with_suffix(".part")
        part.write_text(json.dumps(record))
        os.replace(part, out)


@dataclass(frozen=True)
class _LocalBatch:
    """``foreachBatch``'s function in this process: applies a batch's files (one batch of all
    this process's streams at a time), records it in ``handle``, calls ``on_batch``, and stops
    the query with :class:`BatchFailed` when a table failed."""

    source: _Source
    target: str
    settings: Settings
    spark: SparkSession
    handle: ChangeStream
    on_batch: Callable[[StreamBatch], None] | None
    say: Progress

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        try:
            files = self.source.files(batch_df, batch_id, self.target)
            if not files:
                return
            with _APPLY_LOCK:
                self.say(f"batch {batch_id}: {len(files)} new file(s)")
                summary = apply(files, self.target, settings=self.settings, spark=self.spark,
                                progress=lambda msg: self.say(f"batch {batch_id}: {msg}"))
                batch = self.handle._record(batch_id, files, summary)
                if self.on_batch is not None:
                    self.on_batch(batch)
                if not summary.ok:
                    raise BatchFailed(batch)
        except BaseException as exc:
            self.handle._error = exc  # await_termination raises it instead of Spark's wrapper
            raise


def _in_name_order(files: list[str], landing: Path, target: str, glob_filter: str | None) -> list[str]:
    """A batch's files with every file of ``landing`` not applied yet whose name sorts before the
    last of them, in name order.

    Spark's file source takes files oldest first (modification time) and, with
    ``maxFilesPerTrigger``, cuts the list there: files of equal times come in any order, and a file
    written after another can carry the earlier changes. A stream applies files in name order, as
    ``apply`` does (name order is the arrival order that breaks ties of the vendor's position): a
    later batch's files that were applied here already are skipped by the ledger.
    """
    last = max(files)
    consumed = Ledger(target).consumed()
    earlier = [
        f for f in list_inputs([landing])
        if f < last and f not in consumed and (not glob_filter or fnmatch.fnmatchcase(Path(f).name, glob_filter))
    ]
    return sorted(set(files) | set(earlier))


def _local_path(uri: str) -> str:
    """A ``file:`` path of Spark's listing as ``list_inputs`` spells it (absolute, resolved).

    Hadoop writes local paths unencoded (``file:/landing/a b.json``), so the rest is taken as is.
    """
    for prefix in ("file://", "file:"):
        if uri.startswith(prefix):
            return str(Path(uri[len(prefix):]).resolve())
    return uri


def stream(
    landing: str | os.PathLike[str] | Kafka,
    target: str | os.PathLike[str],
    *,
    settings: Settings | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    trigger: str | dt.timedelta = DEFAULT_TRIGGER,
    max_files_per_trigger: int | None = None,
    path_glob_filter: str | None = None,
    spark: SparkSession | None = None,
    on_batch: Callable[[StreamBatch], None] | None = None,
    progress: Progress | None = None,
    **overrides: Any,
) -> ChangeStream:
    """Start a Structured Streaming query that applies the files landing under ``landing`` to ``target``.

    Each micro-batch runs :func:`lakecdc.apply` on the batch's new files, with the same settings
    (``format``, ``keys``, ``pk_update``, ``column_list``, ``include_tables``, ``contracts``,
    ``engine``, ...: see :data:`APPLY_SETTINGS`), so a stream and ``apply`` runs build the same
    tables and share one ledger: a file is applied once whichever of them took it.

    Args:
        landing: the directory files land in (read recursively; names starting with ``.`` or ``_``
            are ignored, as ``apply`` does), or Kafka topics (:class:`~lakecdc.run.kafka.Kafka`):
            each batch of records is landed as files under the target (``_lakecdc/kafka``), then
            applied; the landing directory holds the checkpoint, which ``apply`` of the same
            :class:`~lakecdc.run.kafka.Kafka` shares (run one of them at a time).
        target: root directory; each source table becomes ``<target>/<table>``.
        settings: a :class:`~lakecdc.config.settings.Settings`, as for ``apply``.
        checkpoint: Spark's checkpoint directory; default ``<target>/_lakecdc/stream-checkpoint``.
            One per landing directory: give another one to stream a second landing directory into
            the same target.
        trigger: ``available-now`` (default: what is there now, then stop), ``once`` (the same in one
            batch) or a processing-time interval (``"10 seconds"``, ``"5 minutes"``): runs until stopped.
        max_files_per_trigger: about this many files per batch (Spark's ``maxFilesPerTrigger``;
            ``once`` ignores it). Default: every new file in one batch (one MERGE per table).
            Files apply in name order, as ``apply`` takes them: Spark picks a batch's files by
            modification time, and the batch takes with them every file not applied yet whose
            name sorts before the last of them.
        path_glob_filter: only file names matching this glob (Spark's ``pathGlobFilter``, e.g. ``*.json``).
        spark: the session; default the active one, else an embedded local one.
        on_batch: called with each :class:`StreamBatch` after its ``apply`` (a failed one too), while
            no other lakecdc stream of this process writes; an exception it raises stops the query
            (a restart replays the batch; the ledger applies nothing twice). On Spark Connect it is
            called in the client, for the batches done so far, whenever the stream is waited on
            or asked for ``total``.
        progress: called with short messages (``batch 3: ...``), as ``apply`` does.
        **overrides: settings by name over ``settings``'s, as for :func:`lakecdc.apply`.

    Returns:
        A started :class:`ChangeStream`; ``await_termination()`` waits for it (and raises a failed
        batch's error), ``last_batch`` / ``total`` hold the summaries.

    Example:
        >>> s = lakecdc.stream("landing/", "lake/", format="ogg-json")          # doctest: +SKIP
        >>> s.await_termination(); print(s.total.render())                      # doctest: +SKIP
    """
    chosen = _stream_settings(settings, overrides, max_files_per_trigger)
    trigger_kw = parse_trigger(trigger)
    target_s = str(Path(A.path("stream", "target", target)).resolve())
    if not isinstance(landing, Kafka):
        A.path("stream", "landing", landing, "'landing/'")
    A.session("stream", spark)
    A.optional_callable("stream", "on_batch", on_batch, "each batch's StreamBatch")
    A.optional_callable("stream", "progress", progress, "each step's message (a str)")
    source = _source(landing, target_s, chosen, max_files_per_trigger, path_glob_filter)
    if checkpoint:
        checkpoint_s = str(Path(checkpoint).resolve())
    elif isinstance(source, _Topics):  # (the one reader of the topics for this target, apply's too)
        checkpoint_s = str(source.landing / CHECKPOINT)
    else:
        checkpoint_s = str(Path(target_s) / DEFAULT_CHECKPOINT)
    spark = spark or get_spark()
    say = progress or (lambda _msg: None)
    handle = ChangeStream(target=target_s, format=chosen.format)

    batch_function = _batch_function(spark, handle, source, target_s, chosen, on_batch, say)
    say(f"streaming {source.describe()} into {target_s} ({chosen.format}, trigger {trigger}, checkpoint {checkpoint_s})")
    handle.query = (  # file: paths, as apply reads them
        source.records(spark)
        .writeStream.queryName(f"lakecdc {chosen.format} {source.describe()} -> {target_s}")
        .option("checkpointLocation", f"file:{checkpoint_s}")
        .trigger(**trigger_kw)
        .foreachBatch(batch_function)
        .start()
    )
    return handle


def _batch_function(
    spark: SparkSession, handle: ChangeStream, source: _Source, target: str, settings: Settings,
    on_batch: Callable[[StreamBatch], None] | None, say: Progress,
) -> Callable[[DataFrame, int], None]:
    """``foreachBatch``'s function: :class:`_LocalBatch` in this process, or on Spark Connect a
    :class:`_ServerBatch`, whose records (a new folder under the target's
    :data:`CONNECT_BATCHES`) ``handle`` reads back and hands to ``on_batch``."""
    if not is_spark_connect(spark):
        return _LocalBatch(source, target, settings, spark, handle, on_batch, say)
    records = Path(target) / CONNECT_BATCHES / uuid.uuid4().hex
    records.mkdir(parents=True, exist_ok=True)
    handle._records, handle._on_batch, handle._say = records, on_batch, say
    return _ServerBatch(source, target, settings, str(records))


def _stream_settings(settings: Settings | None, overrides: Mapping[str, Any], max_files: int | None) -> Settings:
    """The settings every batch applies with, checked (and the contracts read) before the stream
    starts: a mistake fails now, not in the first batch."""
    if max_files is not None and max_files < 1:
        raise ConfigError(f"max_files_per_trigger {max_files}: expected a number of files, 1 or more")
    unknown = sorted(set(overrides) - set(APPLY_SETTINGS))
    if unknown:
        raise ConfigError(f"stream() got unknown setting(s) {', '.join(unknown)}; apply settings are "
                          f"{', '.join(APPLY_SETTINGS)}")
    chosen = Settings.build(settings, **overrides)
    if chosen.reapply:
        raise ConfigError("reapply: a stream applies new files; read files again with lakecdc.apply(..., reapply=...)")
    if chosen.min_file_age:
        raise ConfigError(
            "min_file_age: a stream takes each file once, when Spark lists it, so it cannot leave a young "
            "file for later; make files land whole (write them elsewhere or under a name starting with '.', "
            "then rename them into the landing directory), or use lakecdc.apply / lakecdc run --watch, "
            "which wait for files to settle and also apply lines appended to a file later"
        )
    get_decoder(chosen.required_format(), chosen.options)  # a missing or unknown format fails now
    if chosen.contracts is not None and not isinstance(chosen.contracts, Mapping):
        chosen = chosen.with_(contracts=load_contracts(chosen.contracts))  # read (and checked) once, at the start
    return chosen


def _source(
    landing: str | os.PathLike[str] | Kafka, target: str, settings: Settings, max_files: int | None,
    glob_filter: str | None,
) -> _Source:
    """The stream's input: Kafka topics, or the files landing in a directory."""
    if not isinstance(landing, Kafka):
        return _Files(_landing(landing), max_files, glob_filter)
    if max_files is not None or glob_filter:
        raise ConfigError("max_files_per_trigger and path_glob_filter choose files: a Kafka input takes "
                          "Spark's Kafka source options instead (Kafka(options={'maxOffsetsPerTrigger': ...}))")
    topics = _Topics(landing, landing.landing_dir(target), framing_of(get_decoder(settings.format, settings.options)))
    remove_unfinished(topics.landing)
    return topics


def _landing(landing: str | os.PathLike[str]) -> Path:
    """The landing directory, resolved; it must exist and be a directory."""
    landing_path = Path(landing).resolve()
    if not landing_path.exists():
        raise InputNotFoundError(str(landing))
    if not landing_path.is_dir():
        raise ConfigError(f"stream input {str(landing)!r} is a file; a stream reads a directory "
                          "(use lakecdc.apply for given files)")
    return landing_path


def _file_stream(spark: SparkSession, landing: Path, max_files: int | None, glob_filter: str | None) -> DataFrame:
    """The streaming DataFrame of the paths of new files under ``landing`` (contents not read)."""
    reader = (
        spark.readStream.format("binaryFile")
        .schema("path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY")
        .option("recursiveFileLookup", "true")
        # Spark ignores a file older than the newest it has seen minus maxFileAge (7 days by default):
        # a change file copied in with its old timestamp would be skipped, silently. Files are never
        # too old to apply; the price is the source's memory of the files it has seen.
        .option("maxFileAge", MAX_FILE_AGE)
    )
    if max_files is not None:
        reader = reader.option("maxFilesPerTrigger", str(max_files))
    if glob_filter:
        reader = reader.option("pathGlobFilter", glob_filter)
    # file: paths, as apply reads them (a bare path would be the cluster's default filesystem);
    # Hadoop takes them unencoded, spaces and all
    return reader.load(f"file:{landing}").select("path")


@dataclass(frozen=True)
class KafkaBatches:
    """The function :func:`foreach_batch` returns: lands each micro-batch of Kafka records under
    ``landing`` (:mod:`lakecdc.run.kafka`) and applies every landed file not applied yet to
    ``target``. It holds paths and settings only, so Spark Connect can run it in its server."""

    target: str
    landing: str
    framing: str
    settings: Settings

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        landed = Lander(self.landing, self.framing).land(batch_df, batch_id)
        if landed.directory is None:
            return
        with _APPLY_LOCK:
            summary = apply(list_inputs([self.landing]), self.target, settings=self.settings,
                            spark=batch_df.sparkSession)
        if not summary.ok:
            raise BatchFailed(StreamBatch(batch_id, (str(landed.directory),), summary, summary))


def foreach_batch(
    target: str | os.PathLike[str],
    *,
    settings: Settings | None = None,
    landing: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> KafkaBatches:
    """A function for your own ``writeStream.foreachBatch(...)`` over Spark's Kafka source: each
    micro-batch's records are landed as files, then applied to ``target`` as :func:`lakecdc.apply`
    applies files (the same settings: ``format``, ``keys``, ...).

    Exactly once with your query's checkpoint: a batch Spark runs again (a restart before its
    commit) holds the same offsets and lands into the directory it landed into the first time;
    the ledger applies every landed file once.

    Args:
        target: root directory; each source table becomes ``<target>/<table>``.
        settings: a :class:`~lakecdc.config.settings.Settings`, as for ``apply``.
        landing: where batches land (default ``<target>/_lakecdc/kafka``).
        **overrides: settings by name over ``settings``'s, as for :func:`lakecdc.apply`.

    Example:
        >>> records = spark.readStream.format("kafka").option("subscribe", "orders") ...  # doctest: +SKIP
        >>> (records.writeStream.option("checkpointLocation", "chk/")                     # doctest: +SKIP
        ...     .foreachBatch(lakecdc.foreach_batch("lake/", format="debezium-json")).start())
    """
    chosen = _stream_settings(settings, overrides, None)
    target_s = str(Path(A.path("foreach_batch", "target", target)).resolve())
    if landing is not None:
        A.path("foreach_batch", "landing", landing, "'lake/_landing'")
    where = Path(landing).resolve() if landing is not None else Path(target_s) / DEFAULT_LANDING
    remove_unfinished(where)
    return KafkaBatches(target_s, str(where), framing_of(get_decoder(chosen.format, chosen.options)), chosen)
