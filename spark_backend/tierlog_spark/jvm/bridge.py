"""The planner the JVM reader asks on the driver, and its installation in a session's JVM.

The JVM reader (``io.tierlog.spark.TierlogProvider``) decodes on executors, but planning a read
needs what only Python has: the options parser, the remote log metadata, the storage plugin.
So the JVM calls back into the driver's Python process through Py4J, with JSON in and out:

* ``check``: may the JVM read these options? Not when the storage plugin cannot say where a
  segment's bytes are (no ``tierlog_locate_log_segment``, or a storage without paths or signed
  URLs, such as ``memory://``): the JVM then hands the query to the Python data source.
* ``push``: which filters the reader applies (``pushdown.push_filters``, as the Python reader).
* ``plan``: the tasks, planned exactly as the Python reader plans them (``TierlogReader``), each
  range resolved into bytes to read and aborted transactions to drop (``tasks``).

Every response is a JSON object; a failure is ``{"error": {"type", "message"}}``, never an
exception across Py4J, so the JVM raises it with the message the Python reader would give.

Spark Connect sessions have no JVM in the client process: there is no bridge to install and
``spark.read.format("tierlog")`` reads through the Python data source.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tierlog.errors import TierlogError

from ..options import ReadOptions, TierlogOptionError
from .filters import FilterFormatError, filter_from_json
from .tasks import SEGMENT_URL_LIFETIME_S, TaskResolver

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from tierlog.model import RemoteLogSegmentMetadata
    from tierlog.spi import RemoteStorageManager

    from ..datasource import TierlogReader

__all__ = [
    "BRIDGE_CLASS",
    "Planner",
    "bridge_class",
    "install",
    "installed",
    "register_python_source",
    "uninstall",
]

log = logging.getLogger(__name__)

#: The JVM class holding the installed planner.
BRIDGE_CLASS = "io.tierlog.spark.PlannerBridge"
JVM = "jvm"
PYTHON = "python"


class Planner:
    """Implements ``io.tierlog.spark.Planner`` for the JVM reader; see the module doc.

    Calls arrive on Py4J's callback threads, possibly several at once (concurrent queries).
    """

    class Java:
        implements = ["io.tierlog.spark.Planner"]

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Whether the storage of some runtime settings locates segments, once a segment showed
        #: it: a property of the storage (its filesystem), not of one segment.
        self._locating: dict[str, tuple[str, str]] = {}

    # --- Py4J entry points: JSON strings in and out, never an exception -----------------------

    def check(self, request: str) -> str:
        return _respond(self.answer_check, request)

    def push(self, request: str) -> str:
        return _respond(self.answer_push, request)

    def plan(self, request: str) -> str:
        return _respond(self.answer_plan, request)

    # --- the same, on parsed requests ---------------------------------------------------------

    def answer_check(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``{"reader": "jvm"|"python", "why": ...}`` for the request's options.

        Options a batch read refuses may still be a stream's (the JVM table serves both and a
        stream keeps the Python reader), and options nothing accepts are left to the Python
        data source, so its error names the problem as it would without the JVM reader.
        """
        options = _options(request)
        try:
            read = ReadOptions.from_options(options)
        except TierlogOptionError as batch_error:
            try:
                read = ReadOptions.from_options(options, streaming=True)
            except TierlogOptionError:
                return {"reader": PYTHON, "why": str(batch_error)}
        reader, why = self.reader_for(read)
        return {"reader": reader, "why": why}

    def answer_push(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``{"rest": [...]}``: the indexes of the filters left to Spark."""
        documents = request.get("filters") or []
        if not isinstance(documents, list):
            raise ValueError(f"'filters' is a list of filter objects, not {documents!r}")
        try:
            reader = _reader(ReadOptions.from_options(_options(request)))
        except TierlogOptionError:
            return {"rest": list(range(len(documents)))}  # ``plan`` reports the options
        rest = []
        for index, document in enumerate(documents):
            try:
                spark_filter = filter_from_json(document)
            except FilterFormatError:
                rest.append(index)
                continue
            if reader.pushFilters([spark_filter]):
                rest.append(index)
        return {"rest": rest}

    def answer_plan(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``{"tasks": [{"ranges": [...]}, ...]}`` for the options and the pushed filters.

        The columns asked for do not change the plan: every range is read whole either way.
        """
        from ..storage import storage_for

        read = ReadOptions.from_options(_options(request))
        reader = _reader(read)
        documents = request.get("filters") or []
        if not isinstance(documents, list):
            raise ValueError(f"'filters' is a list of filter objects, not {documents!r}")
        reader.pushFilters([filter_from_json(document) for document in documents])
        partitions = reader.partitions()
        resolver = TaskResolver(
            lambda: storage_for(read.settings),
            bounds=reader.selection.bounds,
            read_committed=read.read_committed,
        )
        return {"tasks": resolver.tasks(partitions)}

    # --- whether the storage locates segments -------------------------------------------------

    def reader_for(self, read: ReadOptions) -> tuple[str, str]:
        """The reader for parsed options, and why: the JVM unless the storage cannot locate
        segment bytes."""
        from ..storage import storage_for

        storage = storage_for(read.settings)
        if not _can_locate(storage):
            return PYTHON, (
                f"storage plugin {storage.provider!r} does not implement "
                "tierlog_locate_log_segment, so only the plugin can read its segments"
            )
        key = json.dumps(sorted(read.settings.items()), default=str)
        with self._lock:
            known = self._locating.get(key)
        if known is not None:
            return known
        segment = _some_segment(read)
        if segment is None:
            return JVM, (
                f"storage plugin {storage.provider!r} implements tierlog_locate_log_segment "
                "(nothing to read is tiered yet)"
            )
        try:
            location = storage.locate_log_segment(segment, 0, None, SEGMENT_URL_LIFETIME_S)
        except TierlogError as err:  # the Python reader meets it too, and reports it
            return PYTHON, (
                f"storage plugin {storage.provider!r} failed to locate segment "
                f"{segment.remote_log_segment_id}: {err}"
            )
        if location is None:
            answer = (
                PYTHON,
                (
                    f"storage plugin {storage.provider!r} cannot locate the bytes of segment "
                    f"{segment.remote_log_segment_id} (its storage has no file path or signed URL "
                    "to give), so only the plugin can read them"
                ),
            )
        else:
            kind = location.to_json()["kind"]
            answer = (
                JVM,
                (
                    f"storage plugin {storage.provider!r} locates segment bytes ({kind} sources), "
                    "which the JVM reads and decodes itself"
                ),
            )
        with self._lock:
            self._locating[key] = answer
        return answer


def _can_locate(storage: RemoteStorageManager) -> bool:
    can_locate = getattr(storage, "can_locate", None)
    return bool(can_locate()) if callable(can_locate) else False


def _some_segment(read: ReadOptions) -> RemoteLogSegmentMetadata | None:
    """The first segment the read would plan, to learn whether the storage locates it."""
    from ..metadata_source import load_remote_log_metadata
    from ..planning import plan_reads

    topics = frozenset(read.topics) or None  # ``tierlog spark check``: any topic
    caches = load_remote_log_metadata(
        read.log_dirs, topics=topics, num_partitions=read.num_partitions
    )
    ranges = plan_reads(caches, topics=topics, partitions=read.partitions)
    return ranges[0].segment if ranges else None


def _reader(read: ReadOptions) -> TierlogReader:
    from ..datasource import TierlogReader, spark_schema

    return TierlogReader(read, spark_schema())


def _options(request: Mapping[str, Any]) -> dict[str, str]:
    options = request.get("options")
    if not isinstance(options, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in options.items()
    ):
        raise ValueError(f"'options' is an object of strings, not {options!r}")
    return dict(options)


def _respond(answer: Callable[[Mapping[str, Any]], dict[str, Any]], request: str) -> str:
    """``answer``'s response to a JSON request, or the error it raised, as JSON."""
    try:
        parsed = json.loads(request)
        if not isinstance(parsed, dict):
            raise ValueError(f"a request is a JSON object, not {request[:200]!r}")
        return json.dumps(answer(parsed))
    except Exception as err:  # every failure goes back to the JVM as JSON
        if not isinstance(err, TierlogError | ValueError):
            log.warning("the JVM reader's planner failed", exc_info=True)
        message = str(err) or type(err).__name__
        return json.dumps({"error": {"type": type(err).__name__, "message": message}})


# --- installation in a session's JVM --------------------------------------------------------


def bridge_class(spark: SparkSession) -> Any | None:
    """The session JVM's ``PlannerBridge`` class, or None: a Spark Connect session (no JVM
    here), or the JVM reader's jar not on the driver's classpath."""
    try:
        jvm = spark._jvm  # raises on a Spark Connect session
        if jvm is None:
            return None
        from py4j.java_gateway import JavaClass  # type: ignore[import-untyped]

        candidate = jvm.io.tierlog.spark.PlannerBridge
    except Exception:  # any failure means no bridge
        return None
    return candidate if isinstance(candidate, JavaClass) else None


def register_python_source(spark: SparkSession) -> None:
    """Registers the Python data source as ``tierlog`` in a session whose JVM has the JVM
    reader's provider of the same name (the provider hands reads to it).

    ``spark.dataSource.register`` refuses a name a JVM source already has, so the source goes
    to the session's data source manager directly, as that call does after its check.
    """
    from pyspark.sql.udf import _wrap_function

    from ..datasource import PUSHDOWN_CONF, TierlogDataSource

    context = spark.sparkContext
    jvm = context._jvm
    assert jvm is not None
    wrapped = _wrap_function(context, TierlogDataSource)
    python = jvm.org.apache.spark.sql.execution.datasources.v2.python
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    manager.registerDataSource(
        TierlogDataSource.name(), python.UserDefinedPythonDataSource(wrapped)
    )
    spark.conf.set(PUSHDOWN_CONF, "true")


def install(spark: SparkSession) -> bool:
    """Installs a planner in the session's JVM if its jar is there; whether it did."""
    bridge = bridge_class(spark)
    if bridge is None:
        return False
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
    bridge.install(Planner())
    return True


def uninstall(spark: SparkSession) -> None:
    """Removes the installed planner: reads then go through the Python data source."""
    bridge = bridge_class(spark)
    if bridge is not None:
        bridge.uninstall()


def installed(spark: SparkSession) -> bool:
    """Whether the session's JVM has a planner, so the JVM reader may read."""
    bridge = bridge_class(spark)
    return bridge is not None and bool(bridge.installed())
