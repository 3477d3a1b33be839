"""The baselines of ``wire_bench``: Kafka servers that do nothing but speak the protocol.

:class:`RawSink` answers ApiVersions, Metadata (naming itself the leader of every partition),
InitProducerId and Produce, acknowledging produced batches without storing them: what a client
reaches when the broker costs nothing but the network and the codec. :class:`RawSource` answers
ApiVersions, Metadata, ListOffsets and Fetch from batches held in memory. Both read frames as the
broker's listener does (a thread per connection, a buffered reader, strict order) and decode and
encode with kafka-python's ``kafka.protocol`` classes, the broker's codec, so the ratio of a
broker figure to theirs is what the broker's own work costs.
"""

from __future__ import annotations

import bisect
import contextlib
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

_HEADER = struct.Struct(">hhi")
#: In a v2 record batch: the batch length after the first 12 bytes, and the record count.
_BATCH_LENGTH = struct.Struct(">i")
_RECORD_COUNT = struct.Struct(">i")
_LAST_OFFSET_DELTA = struct.Struct(">i")

_MESSAGES: dict[int, tuple[Any, Any]] = {
    request.API_KEY: (request, response)
    for request, response in (
        (ProduceRequest, ProduceResponse),
        (FetchRequest, FetchResponse),
        (ListOffsetsRequest, ListOffsetsResponse),
        (MetadataRequest, MetadataResponse),
        (ApiVersionsRequest, ApiVersionsResponse),
        (InitProducerIdRequest, InitProducerIdResponse),
    )
}

Handler = Callable[[int, Any], Any]


def batches_of(data: bytes) -> list[tuple[int, int, bytes]]:
    """``(base offset, next offset, batch bytes)`` of every v2 batch in ``data``."""
    batches = []
    position = 0
    while position + 61 <= len(data):
        size = 12 + _BATCH_LENGTH.unpack_from(data, position + 8)[0]
        base = int.from_bytes(data[position : position + 8], "big")
        last_delta = _LAST_OFFSET_DELTA.unpack_from(data, position + 23)[0]
        batches.append((base, base + last_delta + 1, data[position : position + size]))
        position += size
    return batches


class RawServer:
    """One listening socket on 127.0.0.1 (a free port) and a thread per connection. Metadata
    names any topic asked for as existing; asked for every topic, it lists ``topics`` and those
    asked for so far."""

    def __init__(
        self, versions: Mapping[int, tuple[int, int]], partitions: int, topics: Sequence[str] = ()
    ) -> None:
        self.versions = dict(versions)
        self.partitions = partitions
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self._sock.getsockname()[:2]
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._topic_ids = {name: uuid.uuid4() for name in topics}
        self._handlers: dict[int, Handler] = {18: self._api_versions, 3: self._metadata}

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> Self:
        threading.Thread(target=self._accept, name="raw-accept", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._sock.close()
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _peer = self._sock.accept()
            except OSError:
                return
            self._connections.add(conn)
            threading.Thread(
                target=self._serve, args=(conn,), daemon=True, name="raw-connection"
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = conn.makefile("rb", buffering=256 * 1024)
        try:
            while not self._stopping.is_set():
                prefix = reader.read(4)
                if len(prefix) < 4:
                    return
                frame = bytes(reader.read(int.from_bytes(prefix, "big", signed=True)))
                key, version, correlation_id = _HEADER.unpack_from(frame)
                lowest, highest = self.versions.get(key, (0, -1))
                if key not in self._handlers or not lowest <= version <= highest:
                    return  # as the broker does: an unserved API closes the connection
                request = _MESSAGES[key][0].decode(frame, version=version, header=True)
                response = self._handlers[key](version, request)
                if response is None:
                    continue
                response.API_VERSION = version
                response.with_header(correlation_id=correlation_id)
                conn.sendall(bytes(response.encode(header=True, framed=True)))
        except OSError:
            return
        finally:
            self._connections.discard(conn)
            conn.close()

    def _api_versions(self, version: int, _request: Any) -> Any:
        response = ApiVersionsResponse[version]
        return response(
            error_code=0,
            api_keys=[
                response.ApiVersion(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(self.versions.items())
            ],
            throttle_time_ms=0,
        )

    def _metadata(self, version: int, request: Any) -> Any:
        response = MetadataResponse[version]
        topic_class = response.MetadataResponseTopic
        partition_class = topic_class.MetadataResponsePartition
        names = [t.name for t in request.topics or ()] or list(self._topic_ids)
        topics = []
        for name in names:
            topic_id = self._topic_ids.setdefault(name, uuid.uuid4())
            partitions = [
                partition_class(
                    error_code=0,
                    partition_index=index,
                    leader_id=0,
                    leader_epoch=0,
                    replica_nodes=[0],
                    isr_nodes=[0],
                    offline_replicas=[],
                )
                for index in range(self.partitions)
            ]
            topics.append(
                topic_class(
                    error_code=0,
                    name=name,
                    topic_id=topic_id,
                    is_internal=False,
                    partitions=partitions,
                )
            )
        return response(
            throttle_time_ms=0,
            brokers=[
                response.MetadataResponseBroker(
                    node_id=0, host=self.host, port=self.port, rack=None
                )
            ],
            cluster_id="raw",
            controller_id=0,
            topics=topics,
        )


class RawSink(RawServer):
    """Acknowledges every produced batch with the offsets a log would give it, stores nothing."""

    def __init__(self, versions: Mapping[int, tuple[int, int]], partitions: int) -> None:
        super().__init__(versions, partitions)
        self._handlers.update({0: self._produce, 22: self._init_producer_id})
        self._next_offset: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self.records = 0
        self._producer_ids = 1000

    def _init_producer_id(self, version: int, _request: Any) -> Any:
        with self._lock:
            self._producer_ids += 1
            producer_id = self._producer_ids
        return InitProducerIdResponse[version](
            throttle_time_ms=0, error_code=0, producer_id=producer_id, producer_epoch=0
        )

    def _produce(self, version: int, request: Any) -> Any:
        response = ProduceResponse[version]
        topic_class = response.TopicProduceResponse
        partition_class = topic_class.PartitionProduceResponse
        topics = []
        for topic in request.topic_data:
            answers = []
            for partition in topic.partition_data:
                records = partition.records or b""
                count = 0
                position = 0
                while position + 61 <= len(records):
                    count += _RECORD_COUNT.unpack_from(records, position + 57)[0]
                    position += 12 + _BATCH_LENGTH.unpack_from(records, position + 8)[0]
                with self._lock:
                    key = (topic.name, partition.index)
                    base = self._next_offset.get(key, 0)
                    self._next_offset[key] = base + count
                    self.records += count
                answers.append(
                    partition_class(
                        index=partition.index,
                        error_code=0,
                        base_offset=base,
                        log_append_time_ms=-1,
                        log_start_offset=0,
                    )
                )
            topics.append(topic_class(name=topic.name, partition_responses=answers))
        if request.acks == 0:
            return None
        return response(responses=topics, throttle_time_ms=0)


class RawSource(RawServer):
    """Serves the same batches under any topic name (``topic`` when asked for every topic):
    partition ``p`` holds ``batches[p]``."""

    def __init__(
        self,
        versions: Mapping[int, tuple[int, int]],
        batches: Sequence[Sequence[tuple[int, int, bytes]]],
        topic: str = "source",
    ) -> None:
        super().__init__(versions, len(batches), (topic,))
        self._handlers.update({1: self._fetch, 2: self._list_offsets})
        self._batches = [list(b) for b in batches]
        self._bases = [[base for base, _next, _data in b] for b in self._batches]
        self._ends = [b[-1][1] if b else 0 for b in self._batches]

    def _list_offsets(self, version: int, request: Any) -> Any:
        response = ListOffsetsResponse[version]
        topic_class = response.ListOffsetsTopicResponse
        partition_class = topic_class.ListOffsetsPartitionResponse
        topics = []
        for topic in request.topics:
            answers = []
            for partition in topic.partitions:
                index = partition.partition_index
                offset = self._ends[index] if partition.timestamp == -1 else 0
                answers.append(
                    partition_class(
                        partition_index=index,
                        error_code=0,
                        timestamp=-1,
                        offset=offset,
                        leader_epoch=0,
                    )
                )
            topics.append(topic_class(name=topic.name, partitions=answers))
        return response(throttle_time_ms=0, topics=topics)

    def _fetch(self, version: int, request: Any) -> Any:
        response = FetchResponse[version]
        topic_class = response.FetchableTopicResponse
        partition_class = topic_class.PartitionData
        budget = request.max_bytes if version >= 3 else 1 << 62
        found = 0
        topics = []
        for topic in request.topics:
            answers = []
            for partition in topic.partitions:
                index = partition.partition
                chunks = []
                if budget > 0:
                    chunks = self._read(
                        index, partition.fetch_offset, partition.partition_max_bytes
                    )
                    size = sum(len(c) for c in chunks)
                    budget -= size
                    found += size
                answers.append(
                    partition_class(
                        partition_index=index,
                        error_code=0,
                        high_watermark=self._ends[index],
                        last_stable_offset=self._ends[index],
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=b"".join(chunks),
                    )
                )
            topics.append(topic_class(topic=topic.topic, partitions=answers))
        if not found and request.max_wait_ms > 0:
            time.sleep(min(request.max_wait_ms, 500) / 1000)  # the long poll of an idle log
        return response(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)

    def _read(self, index: int, offset: int, max_bytes: int) -> list[bytes]:
        batches = self._batches[index]
        at = bisect.bisect_right(self._bases[index], offset) - 1
        at = max(at, 0)
        chunks: list[bytes] = []
        size = 0
        while at < len(batches):
            _base, next_offset, data = batches[at]
            if next_offset <= offset:
                at += 1
                continue
            if chunks and size + len(data) > max_bytes:
                break
            chunks.append(data)
            size += len(data)
            at += 1
        return chunks
