"""The records of ``__consumer_offsets``, in Kafka's formats, so a Kafka tool can read them.

Every record's key starts with an int16 version that says what it is: 0 and 1 an offset commit
(group, topic, partition), 2 a group's metadata. Values start with their own version. A
tombstone (null value) deletes what its key names, which is how compaction forgets a group or
an offset. Strings are int16-length UTF-8 (-1 for null), bytes int32-length, arrays int32-counted,
as in Kafka's non-flexible message versions; the latest non-flexible versions are written (an
offset value 3, or 1 when it carries an expiry; a group value 3) and every non-flexible version
is read.
"""

from __future__ import annotations

import struct

import attrs

from ..errors import CorruptRecordError

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
GROUP_METADATA_KEY_VERSION = 2

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


#: The longest string a 16-bit length prefix holds: group ids, member ids and topics in keys.
MAX_KEY_STRING_BYTES = 32767


class Writer:
    """Appends Kafka's primitive types to a buffer."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def int16(self, value: int) -> Writer:
        self.buf += _I16.pack(value)
        return self

    def int32(self, value: int) -> Writer:
        self.buf += _I32.pack(value)
        return self

    def int64(self, value: int) -> Writer:
        self.buf += _I64.pack(value)
        return self

    def string(self, value: str | None) -> Writer:
        if value is None:
            return self.int16(-1)
        data = value.encode()
        self.int16(len(data))
        self.buf += data
        return self

    def bytes_(self, value: bytes | None) -> Writer:
        if value is None:
            return self.int32(-1)
        self.int32(len(value))
        self.buf += value
        return self

    def done(self) -> bytes:
        return bytes(self.buf)


class Reader:
    """Reads Kafka's primitive types; running off the end is a CorruptRecordError."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _take(self, size: int) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise CorruptRecordError(f"{self.what} ends early at byte {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def string(self) -> str | None:
        size = self.int16()
        if size < 0:
            return None
        try:
            return self._take(size).decode()
        except UnicodeDecodeError as err:
            raise CorruptRecordError(f"{self.what} holds a string that is not UTF-8") from err

    def required_string(self) -> str:
        value = self.string()
        if value is None:
            raise CorruptRecordError(f"{self.what} holds a null where a string is required")
        return value

    def bytes_(self) -> bytes | None:
        size = self.int32()
        return None if size < 0 else self._take(size)


def key_version(key: bytes) -> int:
    """The version a record key starts with: which kind of record it is."""
    return Reader(key, "a __consumer_offsets key").int16()


# --- offset commits (key versions 0 and 1) ----------------------------------------------------


@attrs.frozen
class OffsetCommitKey:
    group: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        return Writer().int16(1).string(self.group).string(self.topic).int32(self.partition).done()

    @classmethod
    def decode(cls, key: bytes) -> OffsetCommitKey:
        reader = Reader(key, "an offset commit key")
        reader.int16()
        return cls(reader.required_string(), reader.required_string(), reader.int32())


@attrs.frozen
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    #: Set only by OffsetCommit v2-4 with a retention time (value version 1).
    expire_timestamp: int | None = None

    def encode(self) -> bytes:
        if self.expire_timestamp is not None:
            return (
                Writer()
                .int16(1)
                .int64(self.offset)
                .string(self.metadata)
                .int64(self.commit_timestamp)
                .int64(self.expire_timestamp)
                .done()
            )
        return (
            Writer()
            .int16(3)
            .int64(self.offset)
            .int32(self.leader_epoch)
            .string(self.metadata)
            .int64(self.commit_timestamp)
            .done()
        )

    @classmethod
    def decode(cls, value: bytes) -> OffsetCommitValue:
        reader = Reader(value, "an offset commit value")
        version = reader.int16()
        if version not in (0, 1, 2, 3):
            raise CorruptRecordError(f"offset commit value version {version} is not readable")
        offset = reader.int64()
        epoch = reader.int32() if version >= 3 else -1
        metadata = reader.string() or ""
        commit = reader.int64()
        expire = reader.int64() if version == 1 else None
        return cls(offset, metadata, commit, epoch, expire)


# --- group metadata (key version 2) -----------------------------------------------------------


@attrs.frozen
class GroupMetadataKey:
    group: str

    def encode(self) -> bytes:
        return Writer().int16(GROUP_METADATA_KEY_VERSION).string(self.group).done()

    @classmethod
    def decode(cls, key: bytes) -> GroupMetadataKey:
        reader = Reader(key, "a group metadata key")
        reader.int16()
        return cls(reader.required_string())


@attrs.frozen
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@attrs.frozen
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = ()

    def encode(self) -> bytes:
        writer = (
            Writer()
            .int16(3)
            .string(self.protocol_type)
            .int32(self.generation)
            .string(self.protocol)
            .string(self.leader)
            .int64(self.current_state_timestamp)
            .int32(len(self.members))
        )
        for m in self.members:
            writer.string(m.member_id).string(m.group_instance_id).string(m.client_id)
            writer.string(m.client_host).int32(m.rebalance_timeout).int32(m.session_timeout)
            writer.bytes_(m.subscription).bytes_(m.assignment)
        return writer.done()

    @classmethod
    def decode(cls, value: bytes) -> GroupMetadataValue:
        reader = Reader(value, "a group metadata value")
        version = reader.int16()
        if version not in (0, 1, 2, 3):
            raise CorruptRecordError(f"group metadata value version {version} is not readable")
        protocol_type = reader.required_string()
        generation = reader.int32()
        protocol = reader.string()
        leader = reader.string()
        timestamp = reader.int64() if version >= 2 else -1
        members = []
        for _ in range(reader.int32()):
            member_id = reader.required_string()
            instance = reader.string() if version >= 3 else None
            client_id = reader.required_string()
            client_host = reader.required_string()
            rebalance = reader.int32() if version >= 1 else -1
            session = reader.int32()
            if rebalance < 0:
                rebalance = session
            members.append(
                MemberMetadata(
                    member_id,
                    instance,
                    client_id,
                    client_host,
                    rebalance,
                    session,
                    reader.bytes_() or b"",
                    reader.bytes_() or b"",
                )
            )
        return cls(protocol_type, generation, protocol, leader, timestamp, tuple(members))


@attrs.frozen
class CoordinatorRecord:
    """One record to append: a key and a value (None: a tombstone)."""

    key: bytes
    value: bytes | None
