"""The ``tierlog`` data source's options, checked on the driver before anything is read.

Option values arrive as strings (Spark's rule). A wrong value fails the query at once with an
error naming the option, rather than as a task failure on an executor.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from tierlog.config import BrokerConfig
from tierlog.config.sources import read_file
from tierlog.errors import TierlogError

from .planning import Bounds

__all__ = [
    "OPTIONS",
    "STREAM_OPTIONS",
    "ReadOptions",
    "StreamOptions",
    "TierlogOptionError",
    "source_options",
]

#: Runtime settings given inline: ``tierlog.rsm.config.url`` sets ``rsm.config.url``.
SETTING_PREFIX = "tierlog."
NUM_PARTITIONS_KEY = "remote.log.metadata.topic.num.partitions"
DEFAULT_MAX_BYTES_PER_TASK = 128 << 20

OPTIONS = {
    "config": "a .properties or .toml file with the runtime settings",
    "log.dirs": "comma-separated log dirs holding __remote_log_metadata (default: the runtime's)",
    "topics": "comma-separated topic names (required)",
    "partitions": "comma-separated partition numbers (default: all)",
    "startingoffset": "first offset to read, inclusive",
    "endingoffset": "offset to stop before, exclusive",
    "startingtimestamp": "first record timestamp to read, in ms, inclusive",
    "endingtimestamp": "record timestamp to stop before, in ms, exclusive",
    "isolation.level": "read_uncommitted (default) or read_committed",
    "rlmm.num.partitions": "partition count of __remote_log_metadata (default: the runtime's)",
    "mintasks": "tasks a read is spread over at least, where there are enough segments: small "
    "segments are packed together up to the share of each (default: twice the planning "
    "machine's cores)",
    "maxbytespertask": "bytes of a segment one task reads at most, where its index allows "
    f"(default {DEFAULT_MAX_BYTES_PER_TASK})",
    "includelocal": "true: also read the records not tiered yet from the local segments in "
    "log.dirs, up to the high watermark (batch reads; the log dirs must be reachable from the "
    "executors); false (default): only the remote tier",
}

#: Options only ``spark.readStream`` takes.
STREAM_OPTIONS = {
    "startingoffsets": "where a new query starts: earliest (default), latest, or JSON such as "
    '{"orders": {"0": 42, "1": -2}} (-2 earliest, -1 latest; unlisted partitions: earliest)',
    "maxsegmentspertrigger": "remote segments one micro-batch reads at most (default: all)",
    "maxrecordspertrigger": "offsets one micro-batch reads at most (default: all)",
    "failondataloss": "true (default): fail when offsets a query has not read yet were deleted "
    "from remote storage; false: continue from the earliest remote offset",
}

#: Batch options a stream refuses: it starts at ``startingOffsets``, has no end, and reads what is
#: tiered.
BATCH_ONLY_OPTIONS = (
    "startingoffset",
    "endingoffset",
    "startingtimestamp",
    "endingtimestamp",
    "includelocal",
)

EARLIEST, LATEST = -2, -1


def default_min_tasks() -> int:
    """Twice the cores of the machine planning the read: in local mode, enough tasks to keep
    every core busy with some slack for uneven ones; on a cluster, set ``minTasks``."""
    return 2 * (os.cpu_count() or 1)


class TierlogOptionError(TierlogError, ValueError):
    """A data source option that is missing, unknown or has a wrong value; names the option."""


@attrs.frozen
class ReadOptions:
    """What a ``tierlog`` read is asked for, parsed; pickled to every task."""

    #: The runtime settings executors build their storage plugin from.
    settings: Mapping[str, Any] = attrs.field(repr=False)
    log_dirs: tuple[str, ...]
    topics: tuple[str, ...]
    partitions: tuple[int, ...] | None
    bounds: Bounds
    read_committed: bool
    num_partitions: int | None
    max_bytes_per_task: int = DEFAULT_MAX_BYTES_PER_TASK
    #: Whether to read the local segments after the tiered ones (``local_segments``).
    include_local: bool = False
    #: How many tasks the segments are packed into at least (``packing``).
    min_tasks: int = attrs.field(factory=default_min_tasks)

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], *, need_topics: bool = True, streaming: bool = False
    ) -> ReadOptions:
        """Parse Spark's case-insensitive options; raises TierlogOptionError.

        Jobs over every topic pass ``need_topics=False``: no ``topics`` option then means none.
        A stream (``streaming``) also takes ``STREAM_OPTIONS``, parsed by ``StreamOptions``.
        """
        options = {key.lower(): value for key, value in options.items()}
        known = {**OPTIONS, **STREAM_OPTIONS} if streaming else OPTIONS
        unknown = sorted(k for k in options if k not in known and not k.startswith(SETTING_PREFIX))
        if unknown:
            kind = "stream" if streaming else "batch read"
            hint = " (it is an option of spark.readStream)" if unknown[0] in STREAM_OPTIONS else ""
            raise TierlogOptionError(
                f"unknown tierlog option {unknown[0]!r} for a {kind}{hint}; the options are "
                f"{', '.join(sorted(known))} and {SETTING_PREFIX}<runtime setting>"
            )
        if streaming:
            batch_only = [name for name in BATCH_ONLY_OPTIONS if name in options]
            if batch_only:
                raise TierlogOptionError(
                    f"option {batch_only[0]!r} is for batch reads; a stream starts at "
                    "'startingOffsets' and reads every record from there"
                )
        settings: dict[str, Any] = {}
        if "config" in options:
            try:
                settings.update(read_file(options["config"]))
            except (OSError, TierlogError) as err:
                raise TierlogOptionError(f"option 'config': cannot read the file: {err}") from err
        for key, value in options.items():
            if key.startswith(SETTING_PREFIX):
                settings[key.removeprefix(SETTING_PREFIX)] = value
        try:
            config = BrokerConfig.from_mapping(settings)
        except TierlogError as err:
            raise TierlogOptionError(
                f"invalid runtime settings (config, tierlog.*): {err}"
            ) from err
        if not config.get_bool("remote.log.storage.system.enable"):
            raise TierlogOptionError(
                "the runtime settings (config, tierlog.*) must enable remote storage: "
                "remote.log.storage.system.enable = true and the storage plugin's settings"
            )

        if "log.dirs" in options:
            log_dirs = tuple(_names(options, "log.dirs"))
        else:
            log_dirs = tuple(str(d) for d in config.get_list("log.dirs"))

        if "topics" in options:
            topics = tuple(_names(options, "topics"))
        elif need_topics:
            raise TierlogOptionError("option 'topics' is required: the topics to read")
        else:
            topics = ()

        partitions = None
        if "partitions" in options:
            partitions = tuple(_int("partitions", v) for v in _names(options, "partitions"))

        bounds = Bounds(
            first_offset=_optional_int(options, "startingoffset") or 0,
            last_offset=_exclusive(_optional_int(options, "endingoffset")),
            min_timestamp=_optional_int(options, "startingtimestamp"),
            max_timestamp=_exclusive(_optional_int(options, "endingtimestamp")),
        )

        level = options.get("isolation.level", "read_uncommitted").strip().lower()
        if level not in ("read_uncommitted", "read_committed"):
            raise TierlogOptionError(
                f"option 'isolation.level' is {options['isolation.level']!r}; use "
                "read_uncommitted or read_committed"
            )

        num_partitions = _optional_int(options, "rlmm.num.partitions", minimum=1)
        if num_partitions is None:
            prefix = config.get_str("remote.log.metadata.manager.impl.prefix") or "rlmm.config."
            configured = config.plugin_slice(prefix).get(NUM_PARTITIONS_KEY)
            if configured is not None:
                name = f"{prefix}{NUM_PARTITIONS_KEY} (runtime setting)"
                num_partitions = _int(name, str(configured), minimum=1)
        max_bytes = _optional_int(options, "maxbytespertask", minimum=1)
        min_tasks = _optional_int(options, "mintasks", minimum=1)
        include_local = options.get("includelocal", "false").strip().lower()
        if include_local not in ("true", "false"):
            raise TierlogOptionError(
                f"option 'includelocal' is {options['includelocal']!r}; use true or false"
            )
        return cls(
            settings=settings,
            log_dirs=log_dirs,
            topics=topics,
            partitions=partitions,
            bounds=bounds,
            read_committed=level == "read_committed",
            num_partitions=num_partitions,
            max_bytes_per_task=DEFAULT_MAX_BYTES_PER_TASK if max_bytes is None else max_bytes,
            include_local=include_local == "true",
            min_tasks=default_min_tasks() if min_tasks is None else min_tasks,
        )


@attrs.frozen
class StreamOptions:
    """What a ``tierlog`` stream adds to a read: where a new query starts, and how much one
    micro-batch takes."""

    #: "earliest", "latest", or offsets by topic and partition (EARLIEST / LATEST allowed).
    starting_offsets: str | Mapping[str, Mapping[int, int]]
    max_segments_per_trigger: int | None
    max_records_per_trigger: int | None
    fail_on_data_loss: bool

    @classmethod
    def from_options(cls, options: Mapping[str, str], topics: Sequence[str]) -> StreamOptions:
        """Parse the stream options of Spark's options; ``topics`` are the topics read."""
        options = {key.lower(): value for key, value in options.items()}
        loss = options.get("failondataloss", "true").strip().lower()
        if loss not in ("true", "false"):
            raise TierlogOptionError(
                f"option 'failondataloss' is {options['failondataloss']!r}; use true or false"
            )
        return cls(
            starting_offsets=_starting_offsets(options.get("startingoffsets", "earliest"), topics),
            max_segments_per_trigger=_optional_int(options, "maxsegmentspertrigger", minimum=1),
            max_records_per_trigger=_optional_int(options, "maxrecordspertrigger", minimum=1),
            fail_on_data_loss=loss == "true",
        )


def _starting_offsets(text: str, topics: Sequence[str]) -> str | dict[str, dict[int, int]]:
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return word
    usage = (
        "use earliest, latest or a JSON object of topics, partitions and offsets such as "
        '{"orders": {"0": 42, "1": -2}}'
    )
    try:
        parsed = json.loads(text)
    except ValueError:
        raise TierlogOptionError(f"option 'startingoffsets' is {text!r}; {usage}") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise TierlogOptionError(f"option 'startingoffsets' is {text!r}; {usage}")
    result: dict[str, dict[int, int]] = {}
    for topic, offsets in parsed.items():
        if topic not in topics:
            raise TierlogOptionError(
                f"option 'startingoffsets' names topic {topic!r}, which option 'topics' "
                f"does not ({', '.join(topics)})"
            )
        result[topic] = {}
        for partition, offset in offsets.items():
            if (
                not isinstance(offset, int)
                or isinstance(offset, bool)
                or offset < EARLIEST
                or not partition.isdigit()
            ):
                raise TierlogOptionError(
                    f"option 'startingoffsets': {topic} partition {partition!r} offset "
                    f"{offset!r}; partitions are numbers and offsets at least -2 (-2 earliest, "
                    "-1 latest)"
                )
            result[topic][int(partition)] = offset
    return result


def source_options(source: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, str]:
    """Source options for runtime settings given inline or as a config file (jobs take either)."""
    if isinstance(source, Mapping):
        return {f"{SETTING_PREFIX}{key}": str(value) for key, value in source.items()}
    return {"config": os.fspath(source)}


def _names(options: Mapping[str, str], name: str) -> list[str]:
    values = [part.strip() for part in options[name].split(",")]
    if not options[name].strip() or any(not value for value in values):
        raise TierlogOptionError(
            f"option {name!r} is {options[name]!r}; expected a comma-separated list of values"
        )
    return values


def _int(name: str, text: str, *, minimum: int = 0) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise TierlogOptionError(f"option {name!r}: {text!r} is not an integer") from None
    if value < minimum:
        raise TierlogOptionError(f"option {name!r} is {value}; it must be at least {minimum}")
    return value


def _optional_int(options: Mapping[str, str], name: str, *, minimum: int = 0) -> int | None:
    text = options.get(name)
    return None if text is None else _int(name, text, minimum=minimum)


def _exclusive(end: int | None) -> int | None:
    return None if end is None else end - 1
