"""The ``tierlog`` PySpark data source: a batch read of tiered records straight from remote storage.

The driver reads what is tiered from the brokers' copies of ``__remote_log_metadata`` (no broker
needs to run) and plans one task per remote segment range; each task fetches its segment through
the runtime's storage plugin and decodes it into Arrow batches. Only the remote tier is read,
unless option ``includeLocal`` adds the records still only on the brokers' disks, up to the
high watermark (see ``local_segments``).

Usage::

    tierlog_spark.register(spark)
    df = (
        spark.read.format("tierlog")
        .option("config", "server.properties")
        .option("topics", "orders")
        .load()
    )

Filters on topic, partition, offset and timestamp are applied while planning (see ``pushdown``),
which Spark allows only with ``spark.sql.python.filterPushdown.enabled``; ``register`` sets it.
``spark.readStream.format("tierlog")`` reads the same records as they are tiered (see
``streaming``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from .options import ReadOptions, TierlogOptionError
from .planning import SegmentRange, plan_reads
from .pushdown import Selection, push_filters

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

__all__ = ["TierlogDataSource", "register", "spark_schema"]

log = logging.getLogger(__name__)

#: Python data sources with pushFilters only run with this Spark setting on.
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def spark_schema() -> StructType:
    """``decode.SCHEMA`` as a Spark schema."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from .decode import SCHEMA

    return from_arrow_schema(SCHEMA)


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("tierlog")`` available in ``spark``, with filter pushdown on."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(TierlogDataSource)


class TierlogDataSource(DataSource):
    """Tiered records of the topics named in the options; see the module doc."""

    @classmethod
    def name(cls) -> str:
        return "tierlog"

    def schema(self) -> StructType:
        return spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        return TierlogReader(ReadOptions.from_options(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .streaming import TierlogStreamReader

        _check_schema(schema)
        return TierlogStreamReader.from_options(self.options, schema)


def _check_schema(schema: StructType) -> None:
    """A schema given to the reader may name any of the source's columns, in any order, each
    with its type: a projection, so that Spark takes over only the columns a job reads (the
    Python data source API has no column pruning of its own)."""
    columns = {field.name: field.dataType for field in spark_schema().fields}
    if not schema.fields:
        raise TierlogOptionError("the schema given to the tierlog source names no column")
    seen: set[str] = set()
    for field in schema.fields:
        wanted = columns.get(field.name)
        if wanted is None:
            raise TierlogOptionError(
                f"the tierlog source has no column {field.name!r}; its columns are "
                f"{', '.join(columns)}"
            )
        if field.dataType.simpleString() != wanted.simpleString():
            raise TierlogOptionError(
                f"column {field.name!r} of the tierlog source is "
                f"{wanted.simpleString()}, not {field.dataType.simpleString()}"
            )
        if field.name in seen:
            raise TierlogOptionError(f"the schema names column {field.name!r} twice")
        seen.add(field.name)


@attrs.frozen
class SegmentPartition(InputPartition):
    """One task: ranges of remote segments, read one after the other (see ``packing``)."""

    ranges: tuple[SegmentRange, ...]


class TierlogReader(DataSourceReader):
    """Plans on the driver from offline metadata, reads on executors through the storage plugin."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.selection = Selection(
            frozenset(options.topics),
            None if options.partitions is None else frozenset(options.partitions),
            options.bounds,
        )

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        self.selection, rest = push_filters(self.selection, filters)
        return rest

    def partitions(self) -> Sequence[InputPartition]:
        from .metadata_source import load_remote_log_metadata

        selection = self.selection
        if selection.is_empty:
            return []
        caches = load_remote_log_metadata(
            self.options.log_dirs,
            topics=selection.topics,
            num_partitions=self.options.num_partitions,
        )
        found = {tip.topic for tip in caches}
        missing = sorted((selection.topics or frozenset()) - found)
        if missing:
            log.warning(
                "no remote log metadata for topic(s) %s in %s",
                ", ".join(missing),
                ", ".join(self.options.log_dirs),
            )
        ranges = plan_reads(
            caches,
            topics=selection.topics,
            partitions=selection.partitions,
            bounds=selection.bounds,
            read_committed=self.options.read_committed,
        )
        tasks: list[InputPartition] = list(plan_tasks(self.options, ranges))
        if self.options.include_local:
            from .local_segments import plan_local_tasks

            tasks.extend(plan_local_tasks(self.options, selection, caches))
        return tasks

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from .local_segments import LocalSegmentPartition, read_local_range

        if isinstance(partition, LocalSegmentPartition):
            return _cast_all(
                read_local_range(
                    partition.range,
                    min_timestamp=self.selection.bounds.min_timestamp,
                    max_timestamp=self.selection.bounds.max_timestamp,
                    read_committed=self.options.read_committed,
                ),
                self.schema,
            )
        if not isinstance(partition, SegmentPartition):
            return iter(())  # Spark's placeholder when nothing is planned
        return read_ranges(self.options, self.selection, self.schema, partition.ranges)


def plan_tasks(options: ReadOptions, ranges: list[SegmentRange]) -> list[SegmentPartition]:
    """The tasks reading ``ranges``: with what read_committed needs, big segments split, small
    ones packed together."""
    from .packing import pack_ranges
    from .splitting import split_ranges
    from .storage import storage_for

    if options.read_committed:
        ranges = _with_local_aborts(ranges, options.log_dirs)
    ranges = split_ranges(ranges, lambda: storage_for(options.settings), options.max_bytes_per_task)
    packed = pack_ranges(ranges, min_tasks=options.min_tasks, max_bytes=options.max_bytes_per_task)
    return [SegmentPartition(task) for task in packed]


def _with_local_aborts(ranges: list[SegmentRange], log_dirs: Sequence[str]) -> list[SegmentRange]:
    """``ranges`` with the aborted transactions of the local indexes that overlap each."""
    from .local_aborts import local_aborted_transactions

    keys = {(r.topic_id_partition.topic, r.topic_id_partition.partition) for r in ranges}
    local = local_aborted_transactions(log_dirs, keys)
    result = []
    for planned in ranges:
        tip = planned.topic_id_partition
        overlapping = frozenset(
            aborted
            for aborted in local[tip.topic, tip.partition]
            if aborted.last_offset >= planned.first_offset
            and aborted.first_offset <= planned.last_offset
        )
        result.append(attrs.evolve(planned, local_aborted=overlapping))
    return result


def _cast_all(batches: Iterator[pa.RecordBatch], schema: StructType) -> Iterator[pa.RecordBatch]:
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(schema, timezone="UTC")
    for batch in batches:
        yield batch.select(target.names).cast(target)


def read_ranges(
    options: ReadOptions,
    selection: Selection,
    schema: StructType,
    ranges: Sequence[SegmentRange],
) -> Iterator[pa.RecordBatch]:
    """The records of a task's ``ranges``, in order."""
    for planned in ranges:
        yield from read_range(options, selection, schema, planned)


def read_range(
    options: ReadOptions, selection: Selection, schema: StructType, planned: SegmentRange
) -> Iterator[pa.RecordBatch]:
    from pyspark.sql.pandas.types import to_arrow_schema

    from .decode import decode_segment
    from .storage import storage_for
    from .transactions import aborted_transactions

    storage = storage_for(options.settings)
    segment = planned.segment
    aborted: list[Any] = []
    if options.read_committed:
        aborted = aborted_transactions(
            storage,
            planned.txn_segments,
            planned.first_offset,
            planned.last_offset,
            planned.local_aborted,
        )
    stream = storage.fetch_log_segment(segment, planned.start_position, planned.end_position)
    try:
        data = stream.read()
    finally:
        stream.close()
    target = to_arrow_schema(schema, timezone="UTC")
    tip = segment.topic_id_partition
    for batch in decode_segment(
        data,
        topic=tip.topic,
        partition=tip.partition,
        segment_id=str(segment.remote_log_segment_id.id),
        start_offset=planned.first_offset,
        end_offset=planned.last_offset,
        min_timestamp=selection.bounds.min_timestamp,
        max_timestamp=selection.bounds.max_timestamp,
        aborted=[(txn.producer_id, txn.first_offset) for txn in aborted],
        read_committed=options.read_committed,
    ):
        yield batch.select(target.names).cast(target)
