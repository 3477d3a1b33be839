"""Object names a person can read, and the custom metadata that remembers where they went.

``<prefix>/<topic>-<topicId>/<partition>/<20-digit start offset>-<segment uuid>.<kind>``: one
object per kind (the data, each auxiliary index, the manifest). Everything needed to find the
objects is in the segment metadata, so a partial upload (no manifest) can still be deleted.
"""

from __future__ import annotations

import struct
from typing import Final

import attrs
from tierlog.model import CustomMetadata, IndexType, RemoteLogSegmentMetadata

LOG_KIND: Final = "log"
MANIFEST_KIND: Final = "rsm-manifest"
#: Where a manifest is written before an atomic rename, on filesystems without atomic writes.
MANIFEST_TEMP_KIND: Final = "rsm-manifest.tmp"
INDEX_KINDS: Final = {
    IndexType.OFFSET: "index",
    IndexType.TIMESTAMP: "timeindex",
    IndexType.PRODUCER_SNAPSHOT: "snapshot",
    IndexType.TRANSACTION: "txnindex",
    IndexType.LEADER_EPOCH: "leader-epoch-checkpoint",
}
ALL_KINDS: Final = (LOG_KIND, *INDEX_KINDS.values(), MANIFEST_KIND, MANIFEST_TEMP_KIND)

#: Kafka's default cap of custom metadata (remote.log.metadata.custom.metadata.max.bytes).
CUSTOM_METADATA_MAX_BYTES: Final = 128
_CUSTOM_VERSION: Final = 1
_CUSTOM_HEADER = struct.Struct(">BQ")


@attrs.frozen
class SegmentObjects:
    """The object paths of one segment upload."""

    base: str

    def path(self, kind: str) -> str:
        return f"{self.base}.{kind}"

    @property
    def data(self) -> str:
        return self.path(LOG_KIND)

    @property
    def manifest(self) -> str:
        return self.path(MANIFEST_KIND)

    def index(self, index_type: IndexType) -> str:
        return self.path(INDEX_KINDS[index_type])

    @property
    def directory(self) -> str:
        return self.base.rsplit("/", 1)[0]

    def all_paths(self) -> list[str]:
        """Every object an upload of this segment may have left, manifest first."""
        return [self.manifest, *(self.path(kind) for kind in ALL_KINDS if kind != MANIFEST_KIND)]


def segment_objects(prefix: str, metadata: RemoteLogSegmentMetadata) -> SegmentObjects:
    """The objects of ``metadata``'s segment under ``prefix`` (a filesystem path, no protocol)."""
    segment_id = metadata.remote_log_segment_id
    partition = segment_id.topic_id_partition
    parts = [
        f"{partition.topic}-{partition.topic_id}",
        str(partition.partition),
        f"{metadata.start_offset:020d}-{segment_id.id}",
    ]
    root = prefix.rstrip("/")
    return SegmentObjects("/".join([root, *parts]) if root else "/".join(parts))


@attrs.frozen
class UploadRecord:
    """What the copy hands back as custom metadata: the stored size and the object prefix.

    The prefix is kept so that changing the configured URL later does not orphan segments
    already uploaded; it is left out (and the configured one used) when it would not fit in
    Kafka's 128-byte cap.
    """

    stored_size: int
    prefix: str | None

    def encode(self) -> CustomMetadata:
        header = _CUSTOM_HEADER.pack(_CUSTOM_VERSION, self.stored_size)
        prefix = b"" if self.prefix is None else self.prefix.encode()
        if len(header) + len(prefix) > CUSTOM_METADATA_MAX_BYTES:
            prefix = b""
        return CustomMetadata(header + prefix)

    @classmethod
    def decode(cls, custom: CustomMetadata | None) -> UploadRecord | None:
        """The record in ``custom``, or None when it holds something else (or nothing)."""
        if custom is None or len(custom.value) < _CUSTOM_HEADER.size:
            return None
        version, stored_size = _CUSTOM_HEADER.unpack_from(custom.value)
        if version != _CUSTOM_VERSION:
            return None
        try:
            prefix = custom.value[_CUSTOM_HEADER.size :].decode()
        except UnicodeDecodeError:
            return None
        return cls(stored_size=stored_size, prefix=prefix or None)
