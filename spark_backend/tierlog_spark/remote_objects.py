"""What the storage plugin holds, listed straight from the bucket, by segment upload.

The storage SPI can fetch and delete a segment it is told about, but cannot list: finding
objects nobody knows about needs the plugin's object layout. For the fsspec plugin that is
``<prefix>/<topic>-<topicId>/<partition>/<20-digit start offset>-<segment uuid>.<kind>``, listed
with the plugin's own url and storage options.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Mapping
from typing import Any

import attrs
from tierlog.config import BrokerConfig
from tierlog.model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    Uuid,
)

__all__ = ["ListingNotSupportedError", "SegmentUpload", "list_uploads"]

FSSPEC_PLUGIN = "fsspec"
_OBJECT = re.compile(
    r"(?P<topic>.+)-(?P<topic_id>[A-Za-z0-9_-]{22})/(?P<partition>\d+)/"
    r"(?P<start>\d{20})-(?P<segment>[A-Za-z0-9_-]{22})\.(?P<kind>[a-z.-]+)"
)


class ListingNotSupportedError(Exception):
    """The configured storage plugin's objects cannot be listed by this job."""


@attrs.frozen
class SegmentUpload:
    """The objects one upload left in the bucket, and when the newest was written (if known)."""

    topic_id_partition: TopicIdPartition
    segment_id: Uuid
    start_offset: int
    paths: tuple[str, ...]
    modified_ms: int | None

    def as_metadata(self) -> RemoteLogSegmentMetadata:
        """Enough metadata for the plugin's delete hook to find these objects."""
        return RemoteLogSegmentMetadata(
            RemoteLogSegmentId(self.topic_id_partition, self.segment_id),
            self.start_offset,
            self.start_offset,
            -1,
            -1,
            -1,
            0,
            ((0, self.start_offset),),
        )


def list_uploads(
    settings: Mapping[str, Any], topics: Collection[str] | None = None
) -> list[SegmentUpload]:
    """Every segment upload under the storage plugin's url, of ``topics`` if given."""
    fs, prefix = _filesystem(settings)
    root = prefix.rstrip("/")
    try:
        found = fs.find(root, detail=True) if root else fs.find("", detail=True)
    except FileNotFoundError:
        return []
    grouped: dict[tuple[str, str, int, int, str], list[tuple[str, int | None]]] = {}
    for path, info in found.items():
        relative = path[len(root) :].lstrip("/") if root else path
        match = _OBJECT.fullmatch(relative)
        if match is None or (topics is not None and match["topic"] not in topics):
            continue
        key = (
            match["topic"],
            match["topic_id"],
            int(match["partition"]),
            int(match["start"]),
            match["segment"],
        )
        grouped.setdefault(key, []).append((path, _modified_ms(info)))
    uploads = []
    for (topic, topic_id, partition, start, segment), objects in sorted(grouped.items()):
        times = [modified for _path, modified in objects if modified is not None]
        uploads.append(
            SegmentUpload(
                TopicIdPartition.of(Uuid.from_string(topic_id), topic, partition),
                Uuid.from_string(segment),
                start,
                tuple(sorted(path for path, _modified in objects)),
                max(times) if times else None,
            )
        )
    return uploads


def _filesystem(settings: Mapping[str, Any]) -> tuple[Any, str]:
    config = BrokerConfig.from_mapping(settings)
    plugin = config.get_str("remote.log.storage.manager.name")
    if plugin != FSSPEC_PLUGIN:
        raise ListingNotSupportedError(
            f"listing the objects of storage plugin {plugin!r} is not supported "
            f"(only {FSSPEC_PLUGIN!r})"
        )
    import fsspec
    from tierlog_fsspec.config import FsspecStorageConfig

    prefix = config.get_str("remote.log.storage.manager.impl.prefix") or "rsm.config."
    raw = config.plugin_slice(f"plugin.{FSSPEC_PLUGIN}.") | config.plugin_slice(prefix)
    plugin_config = FsspecStorageConfig.from_mapping(raw)
    return fsspec.core.url_to_fs(plugin_config.url, **plugin_config.storage_options)


def _modified_ms(info: Mapping[str, Any]) -> int | None:
    """The object's modification time from an fsspec listing, whatever the backend calls it."""
    for name in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(name)
        if isinstance(value, int | float):
            return int(value * 1000)
        if isinstance(value, dt.datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, str):
            try:
                return int(dt.datetime.fromisoformat(value).timestamp() * 1000)
            except ValueError:
                continue
    return None
