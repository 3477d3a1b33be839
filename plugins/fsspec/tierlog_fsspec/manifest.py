"""The segment manifest: the last object of an upload, and the only way to read the others.

A versioned JSON document a person can read. It holds the segment's size, the chunk size, the
chunk index (stored size, CRC-32C of the stored bytes, and which chunks were left uncompressed),
the transforms, the wrapped data key with the id of the key that wrapped it, and one entry per
auxiliary index (absent for a missing transaction index).
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
from tierlog.errors import RemoteStorageError
from tierlog.model import IndexType

FORMAT_VERSION: Final = 1
ENCRYPTION_ALGORITHM: Final = "AES-256-GCM"
KEY_WRAP_ALGORITHM: Final = "AES-KW"


@attrs.frozen
class Encryption:
    """How the segment's data key is stored: wrapped (RFC 3394) by a key of the key ring."""

    key_id: str
    wrapped_key: bytes = attrs.field(repr=False)


@attrs.frozen
class StoredObject:
    """One auxiliary index: its size, its stored size and the CRC-32C of the stored bytes."""

    size: int
    stored_size: int
    crc32c: int
    compressed: bool = False


@attrs.frozen
class ChunkIndex:
    """Where each chunk of the data object is and how to check it.

    Chunk ``i`` holds segment bytes ``[i * chunk_size, min((i + 1) * chunk_size, size))`` and
    stored bytes ``[offsets[i], offsets[i + 1])`` of the data object.
    """

    chunk_size: int
    size: int
    stored_sizes: tuple[int, ...]
    checksums: tuple[int, ...]
    uncompressed: frozenset[int] = frozenset()
    offsets: tuple[int, ...] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        expected = -(-self.size // self.chunk_size)
        if len(self.stored_sizes) != expected or len(self.checksums) != expected:
            raise ValueError(
                f"a {self.size}-byte segment in {self.chunk_size}-byte chunks has {expected} "
                f"chunks, but the index lists {len(self.stored_sizes)} sizes and "
                f"{len(self.checksums)} checksums"
            )
        object.__setattr__(self, "offsets", (0, *itertools.accumulate(self.stored_sizes)))

    @property
    def count(self) -> int:
        return len(self.stored_sizes)

    @property
    def stored_size(self) -> int:
        return self.offsets[-1]

    def chunk_of(self, position: int) -> int:
        return position // self.chunk_size

    def plain_range(self, chunk: int) -> tuple[int, int]:
        start = chunk * self.chunk_size
        return start, min(start + self.chunk_size, self.size)

    def stored_range(self, chunk: int) -> tuple[int, int]:
        return self.offsets[chunk], self.offsets[chunk + 1]


def _index_map(value: Mapping[IndexType, StoredObject]) -> dict[IndexType, StoredObject]:
    return dict(value)


@attrs.frozen
class SegmentManifest:
    """Everything needed to read one uploaded segment back."""

    segment: Mapping[str, Any] = attrs.field(converter=dict, eq=False)
    upload_id: str
    chunks: ChunkIndex
    compression: str | None
    encryption: Encryption | None
    indexes: Mapping[IndexType, StoredObject] = attrs.field(converter=_index_map)
    version: int = FORMAT_VERSION

    @property
    def size(self) -> int:
        return self.chunks.size

    @property
    def stored_size(self) -> int:
        """Bytes of every object of the upload except the manifest itself."""
        return self.chunks.stored_size + sum(i.stored_size for i in self.indexes.values())

    @property
    def identity(self) -> bool:
        """Whether stored bytes are the segment's bytes (no compression, no encryption)."""
        return self.compression is None and self.encryption is None

    def to_json(self) -> bytes:
        document: dict[str, Any] = {
            "version": self.version,
            "segment": dict(self.segment),
            "upload_id": self.upload_id,
            "size": self.chunks.size,
            "stored_size": self.stored_size,
            "chunk_size": self.chunks.chunk_size,
            "compression": self.compression,
            "encryption": None
            if self.encryption is None
            else {
                "algorithm": ENCRYPTION_ALGORITHM,
                "key_wrap": KEY_WRAP_ALGORITHM,
                "key_id": self.encryption.key_id,
                "wrapped_key": base64.b64encode(self.encryption.wrapped_key).decode(),
            },
            "chunks": {
                "stored_sizes": list(self.chunks.stored_sizes),
                "crc32c": list(self.chunks.checksums),
                "uncompressed": sorted(self.chunks.uncompressed),
            },
            "indexes": {
                index_type.name: attrs.asdict(entry)
                for index_type, entry in sorted(self.indexes.items(), key=lambda i: i[0].name)
            },
        }
        return json.dumps(document, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> SegmentManifest:
        """Parse a manifest; ``where`` names the segment in errors.

        :raises RemoteStorageError: the manifest is not valid JSON, misses fields, or has a
            format this version cannot read.
        """
        try:
            document = json.loads(data)
            version = document["version"]
            if version != FORMAT_VERSION:
                raise RemoteStorageError(
                    f"the manifest of {where} has format version {version!r}; this plugin "
                    f"reads version {FORMAT_VERSION}"
                )
            encryption = document["encryption"]
            chunks = document["chunks"]
            return cls(
                segment=document["segment"],
                upload_id=str(document["upload_id"]),
                chunks=ChunkIndex(
                    chunk_size=_positive(document["chunk_size"]),
                    size=_natural(document["size"]),
                    stored_sizes=_naturals(chunks["stored_sizes"]),
                    checksums=_naturals(chunks["crc32c"]),
                    uncompressed=frozenset(_naturals(chunks.get("uncompressed", ()))),
                ),
                compression=document["compression"],
                encryption=None
                if encryption is None
                else Encryption(
                    key_id=str(encryption["key_id"]),
                    wrapped_key=base64.b64decode(encryption["wrapped_key"], validate=True),
                ),
                indexes={
                    IndexType[name]: StoredObject(
                        size=_natural(entry["size"]),
                        stored_size=_natural(entry["stored_size"]),
                        crc32c=_natural(entry["crc32c"]),
                        compressed=bool(entry.get("compressed", False)),
                    )
                    for name, entry in document["indexes"].items()
                },
            )
        except RemoteStorageError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise RemoteStorageError(
                f"the manifest of {where} is corrupt: {type(err).__name__}: {err}"
            ) from err


def _natural(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


def _positive(value: object) -> int:
    if _natural(value) == 0:
        raise ValueError("expected a positive integer, got 0")
    return value  # type: ignore[return-value]


def _naturals(values: Sequence[object]) -> tuple[int, ...]:
    if not isinstance(values, list | tuple):
        raise ValueError(f"expected a list, got {type(values).__name__}")
    return tuple(_natural(value) for value in values)
