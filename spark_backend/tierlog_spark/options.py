"""The ``tierlog`` data source's options, checked on the driver before anything is read.

Option values arrive as strings (Spark's rule). A wrong value fails the query at once with an
error naming the option, rather than as a task failure on an executor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs
from tierlog.config import BrokerConfig
from tierlog.config.sources import read_file
from tierlog.errors import TierlogError

from .planning import Bounds

__all__ = ["OPTIONS", "ReadOptions", "TierlogOptionError", "source_options"]

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
    "maxbytespertask": "bytes of a segment one task reads at most, where its index allows "
    f"(default {DEFAULT_MAX_BYTES_PER_TASK})",
}


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

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, need_topics: bool = True) -> ReadOptions:
        """Parse Spark's case-insensitive options; raises TierlogOptionError.

        Jobs over every topic pass ``need_topics=False``: no ``topics`` option then means none.
        """
        options = {key.lower(): value for key, value in options.items()}
        unknown = sorted(
            k for k in options if k not in OPTIONS and not k.startswith(SETTING_PREFIX)
        )
        if unknown:
            raise TierlogOptionError(
                f"unknown tierlog option {unknown[0]!r}; the options are "
                f"{', '.join(sorted(OPTIONS))} and {SETTING_PREFIX}<runtime setting>"
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
        return cls(
            settings=settings,
            log_dirs=log_dirs,
            topics=topics,
            partitions=partitions,
            bounds=bounds,
            read_committed=level == "read_committed",
            num_partitions=num_partitions,
            max_bytes_per_task=DEFAULT_MAX_BYTES_PER_TASK if max_bytes is None else max_bytes,
        )


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
