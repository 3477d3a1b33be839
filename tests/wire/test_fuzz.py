"""A fuzz test of the listener: more than 100,000 mutated request frames, then the broker must
still serve, hold every acknowledged record, and have no thread or memory to show for it.

The seeds are real frames from real clients (``frames.py``). Most mutations keep a frame's
structure and change one to three field values to hostile ones (boundary integers, illegal
topic names, nulls, corrupt record batches, repeated arrays): those frames decode, so they
reach the broker's handlers, where a hostile value that is not validated shows up as a logged
exception. The rest are raw: bit flips, truncations, lying size fields, inserted and deleted
bytes, splices of two frames, random API keys and versions; those test the frame reader and
the decoder, and mostly end their connection, as Kafka closes a connection on a malformed
request. So each connection carries a run of frames, pipelined (up to ``WINDOW`` answers due,
so a frame with no answer, an acks=0 produce, holds nothing up), ended by a raw frame or by a
frame of an unknown API key; the broker's own count of request frames read whole
(``request-rate`` of ``socket-server-metrics``) is what must reach 100,000.

Everything is seeded: connection ``i`` draws from ``Random(f"{SEED}:{i}")`` over the same
seeds (``first_of_each_kind``; the test leaves them in its ``tmp_path`` as ``corpus``), and a
failure names the connections (by their local port) whose frames the broker logged an
exception for. The frames run in a process of their own, so that making them takes no time
from the broker's threads. APIs that delete or reconfigure data (DeleteTopics, DeleteRecords,
IncrementalAlterConfigs, AlterPartitionReassignments) are never sent: a well-formed one would
do what it says, which is no bug, and the test checks that acknowledged records survive
everything else; nor is CreateTopics (see ``EXCLUDED_KEYS``). The broker serves the
inter-broker APIs, seeded by ``inter_broker_frames``; LeaderAndIsr and StopReplica come from a
stale controller only, for the same reason.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import random
import re
import resource
import selectors
import socket
import struct
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

import attrs
import pytest
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.records.batch import crc32c
from tierlog.wire.codec import MESSAGES

from .acked import produce_acked, read_back
from .frames import (
    STALE_CONTROLLER_EPOCH,
    first_of_each_kind,
    inter_broker_frames,
    record_client_frames,
    recording,
)

SEED = 20_261_121
#: Request frames the listener must read whole.
FRAMES = 100_000
#: The consumer group APIs every corpus seeds: OffsetCommit, OffsetFetch, FindCoordinator,
#: JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups.
GROUP_APIS = frozenset({8, 9, 10, 11, 12, 13, 14, 15, 16, 42})
#: Connections open at once: a long-polling fetch holds only its own.
AT_ONCE = 8
#: Most frames one connection carries before its closing frame.
RUN = 150
#: Share of raw (structure-breaking) mutations; the rest change field values.
RAW_SHARE = 0.08
#: A connection with nothing sent or received for this long is abandoned (reset).
STALL_S = 3.0
#: How long the broker may hold a long poll (``request.timeout.ms`` caps ``max_wait_ms``).
REQUEST_TIMEOUT_MS = 1000

#: The fuzzed topic keeps little: reads and timestamp searches stay cheap however much the
#: fuzz appends, and so does the memory a fetch of "everything" takes.
CORPUS_TOPIC = {"segment.bytes": str(64 << 10), "retention.bytes": str(128 << 10)}

#: DeleteTopics, DeleteRecords, IncrementalAlterConfigs, AlterPartitionReassignments: a
#: well-formed one does what it says. CreateTopics: one with 2**31 - 1 partitions would too,
#: for as long as the disk lasts (nothing bounds ``num_partitions`` yet).
EXCLUDED_KEYS = frozenset({19, 20, 21, 44, 45})
#: LeaderAndIsr, StopReplica: sent from a stale controller only (see ``inter_broker_frames``).
STALE_CONTROLLER_KEYS = frozenset({4, 5})
UNKNOWN_KEY = 32_000
_SIZE = struct.Struct(">i")

_INTS = {
    "int8": (-(1 << 7), -1, 0, 1, (1 << 7) - 1),
    "int16": (-(1 << 15), -2, -1, 0, 1, (1 << 15) - 1),
    "uint16": (0, 1, (1 << 16) - 1),
    "int32": (-(1 << 31), -2, -1, 0, 1, 1 << 20, (1 << 31) - 1),
    "int64": (-(1 << 63), -2, -1, 0, 1, 1 << 40, (1 << 63) - 1),
}
_STRINGS = (
    None,
    "",
    ".",
    "..",
    "../../etc",
    "a/b",
    "a" * 249,
    "a" * 250,
    "x" * 100_000,
    "tōpic",
    "bad name",
    "__reserved",
    "ok.name_1-2",
)


@attrs.frozen
class Mutation:
    """A size-prefixed request frame. ``answered``: it decodes and asks for an answer (the
    broker answers it unless it closes the connection); ``raw``: its structure is broken, so
    the broker most likely closes the connection after it and frames sent behind it are
    wasted; ``lying``: its size field says more than follows, so nothing may be sent after
    it."""

    frame: bytes
    answered: bool = False
    raw: bool = False
    lying: bool = False


class Mutator:
    """Makes framed, mutated requests from a corpus of real ones."""

    def __init__(self, corpus: Sequence[bytes]) -> None:
        self.corpus = [frame for frame in corpus if _key(frame) in MESSAGES]
        assert self.corpus, "no frame of the corpus decodes"
        groups: dict[bytes, list[bytes]] = {}
        for frame in self.corpus:
            groups.setdefault(frame[:4], []).append(frame)
        #: The seeds by API and version: each is drawn as often, however chatty its client.
        self.groups = list(groups.values())

    def mutate(self, rng: random.Random) -> Mutation:
        seed = rng.choice(rng.choice(self.groups))
        if rng.random() >= RAW_SHARE:
            mutated = self._structured(rng, seed)
            if mutated is not None:
                return mutated
        return self._raw(rng, seed)

    # --- value mutations: the frame still decodes ---------------------------------------

    def _structured(self, rng: random.Random, seed: bytes) -> Mutation | None:
        key, version = struct.unpack_from(">hh", seed)
        message = MESSAGES[key][0].decode(seed, version=version, header=True)
        header = message.header
        slots = [
            (header, field, header.version)
            for field in type(header)._struct._fields
            if field.name in ("correlation_id", "client_id")
        ]
        slots += [(owner, field, version) for owner, field in _slots(message, version)]
        for _ in range(rng.choice((1, 1, 2, 3))):
            owner, field, at = rng.choice(slots)
            value = _hostile(rng, field, getattr(owner, field.name))
            if value is None and not field.nullable_for_version_q(at) and rng.random() < 0.9:
                continue  # mostly keep frames decodable; a null where none may be, now and then
            setattr(owner, field.name, value)
        if key in STALE_CONTROLLER_KEYS:
            message.controller_epoch = STALE_CONTROLLER_EPOCH
        try:
            frame = bytes(message.encode(header=True, framed=True))
        except Exception:  # a value the codec cannot write: fall back to a raw mutation
            return None
        return Mutation(frame, answered=key != 0 or message.acks != 0)

    # --- raw mutations: the frame reader and the decoder --------------------------------

    def _raw(self, rng: random.Random, seed: bytes) -> Mutation:
        data = bytearray(seed)
        kind = rng.randrange(7)
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1:
            del data[rng.randrange(len(data)) :]
        elif kind == 2:
            size = rng.choice(
                (
                    -1,
                    -rng.randint(2, 1 << 31),
                    len(data) + rng.randint(1, 64),
                    max(0, len(data) - rng.randint(1, 64)),
                    0,
                    (1 << 31) - 1,
                )
            )
            return Mutation(_SIZE.pack(size) + bytes(data), raw=True, lying=True)
        elif kind == 3:
            at = rng.randrange(len(data) + 1)
            data[at:at] = rng.randbytes(rng.randint(1, 16))
        elif kind == 4:
            at = rng.randrange(len(data))
            del data[at : at + rng.randint(1, 16)]
        elif kind == 5:
            other = rng.choice(self.corpus)
            data = data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other)) :]
        else:
            key = rng.randint(-2, 80) if rng.random() < 0.5 else _key(bytes(data))
            data[0:4] = struct.pack(">hh", key, rng.randint(-2, 20))
        if _key(bytes(data)) in EXCLUDED_KEYS:
            data[0:2] = struct.pack(">h", UNKNOWN_KEY)
        return Mutation(_framed(bytes(data)), raw=True)


def closing_frame() -> bytes:
    """A request of an unknown API key: the broker reads it, logs it and closes."""
    return _framed(struct.pack(">hhih", UNKNOWN_KEY, 0, 0, -1))


def _key(frame: bytes) -> int:
    return struct.unpack_from(">h", frame)[0] if len(frame) >= 2 else -1


def _framed(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


def _slots(message: Any, version: int) -> Iterator[tuple[Any, Any]]:
    """Every (object, field) of a decoded message present at ``version``, depth first."""
    for field in type(message)._struct._fields:
        if not field.for_version_q(version):
            continue
        yield message, field
        value = getattr(message, field.name)
        if value is None:
            continue
        if field.is_struct_array():
            for item in value:
                yield from _slots(item, version)
        elif field.is_struct():
            yield from _slots(value, version)


def _hostile(rng: random.Random, field: Any, value: Any) -> Any:
    """A value of ``field``'s type that a broker must not trust."""
    kind = field.type_str
    if field.is_array():
        if value is None or rng.random() < 0.2:
            return rng.choice((None, []))
        return list(value) * rng.choice((2, 3))
    if kind in _INTS:
        if rng.random() < 0.2:
            return rng.randint(min(_INTS[kind]), max(_INTS[kind]))
        return rng.choice(_INTS[kind])
    if kind == "bool":
        return not value
    if kind == "float64":
        return rng.choice((float("nan"), float("inf"), -1.0))
    if kind == "uuid":
        return rng.choice((None, uuid.UUID(int=rng.getrandbits(128))))
    if kind == "string":
        return rng.choice(_STRINGS)
    if kind in ("bytes", "records"):
        return corrupt_batch(rng, value if isinstance(value, bytes) else b"")
    return value


def corrupt_batch(rng: random.Random, batch: bytes) -> bytes | None:
    """``batch`` (record batches, possibly empty) made wrong in one of the ways Kafka checks;
    where the change is inside the part the CRC covers, the CRC is often made right again, so
    that the records themselves must be read to find what is wrong."""
    data = bytearray(batch)
    kind = rng.randrange(9) if len(data) >= 61 else rng.choice((0, 8))
    if kind == 0:
        return rng.choice((None, b"", b"\x00" * rng.randint(1, 70)))
    if kind == 1:  # magic
        data[16] = rng.choice((0, 1, 3, 0xFF))
    elif kind == 2:  # batch length lies
        struct.pack_into(">i", data, 8, rng.choice((-1, 0, 1, len(data), len(data) * 2, 1 << 30)))
    elif kind == 3:  # truncated
        del data[rng.randrange(1, len(data)) :]
    elif kind == 4:  # a bit of the CRC-covered part: the records, their count, the codec...
        data[rng.randrange(21, len(data))] ^= 1 << rng.randrange(8)
    elif kind == 5:  # the record count lies
        struct.pack_into(">i", data, 57, rng.choice((-1, 0, 1 << 20, (1 << 31) - 1)))
    elif kind == 6:  # compression codec 5-7, or another real one
        data[22] = (data[22] & 0xF8) | rng.randint(1, 7)
    elif kind == 7:  # timestamps and producer fields at their edges
        at = rng.choice((27, 35, 43, 51, 53))
        width = {27: 8, 35: 8, 43: 8, 51: 2, 53: 4}[at]
        data[at : at + width] = rng.choice((b"\xff", b"\x7f", b"\x00")) * width
    else:  # garbage after the batches
        data += rng.randbytes(rng.randint(1, 40))
    if 4 <= kind <= 7 and rng.random() < 0.6:
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


# --- the harness: many connections, pipelined, through one selector --------------------------


@attrs.define(eq=False)
class _Connection:
    """One fuzzing connection: frames go out while fewer than ``WINDOW`` answers are due (a
    frame sent after the broker closed the connection is never read, and never counted)."""

    index: int
    sock: socket.socket
    rng: random.Random
    left: int
    last_progress: float
    out: bytearray = attrs.Factory(bytearray)
    due: int = 0
    answered: int = 0
    lying: bool = False
    #: Bytes of the answer being read that are still to come (its size prefix included).
    header: bytearray = attrs.Factory(bytearray)
    rest: int = 0

    def read_answers(self, data: bytes) -> None:
        """Counts the answers in ``data`` without keeping them."""
        view, at = memoryview(data), 0
        while at < len(view):
            if self.rest:
                taken = min(self.rest, len(view) - at)
                self.rest -= taken
                at += taken
                if not self.rest:
                    self.answered += 1
                continue
            need = 4 - len(self.header)
            self.header += view[at : at + need]
            at += need
            if len(self.header) == 4:
                self.rest = max(0, _SIZE.unpack(self.header)[0])
                self.header.clear()
                if not self.rest:
                    self.answered += 1


#: Answers a connection may have due before it sends more.
WINDOW = 8


@attrs.define
class FuzzRun:
    connections: int = 0
    sent: int = 0
    abandoned: int = 0
    ports: dict[int, int] = attrs.Factory(dict)


def fire(
    address: tuple[str, int], mutator: Mutator, seed: int, enough: Callable[[], bool]
) -> FuzzRun:
    """Opens connections (``AT_ONCE`` at a time) and sends mutated frames until ``enough()``."""
    run = FuzzRun()
    selector = selectors.DefaultSelector()
    open_: dict[socket.socket, _Connection] = {}

    def close(conn: _Connection, *, reset: bool) -> None:
        selector.unregister(conn.sock)
        del open_[conn.sock]
        if reset:  # no TIME_WAIT left behind, no more frames read
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.sock.close()

    def connect(now: float) -> None:
        sock = socket.create_connection(address, timeout=5)
        sock.setblocking(False)
        index = run.connections
        rng = random.Random(f"{seed}:{index}")
        conn = _Connection(index, sock, rng, rng.randint(1, RUN), now)
        run.ports[sock.getsockname()[1]] = index
        run.connections += 1
        open_[sock] = conn
        selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    next_check = 0.0
    try:
        while True:
            now = time.monotonic()
            if now >= next_check:
                next_check = now + 0.1
                if enough():
                    break
                for conn in [c for c in open_.values() if now - c.last_progress > STALL_S]:
                    run.abandoned += 1
                    close(conn, reset=True)
            while len(open_) < AT_ONCE:
                connect(now)
            for key, events in selector.select(timeout=0.05):
                conn = key.data
                if events & selectors.EVENT_READ and not _receive(conn):
                    close(conn, reset=False)  # the broker closed it
                    continue
                if events & selectors.EVENT_WRITE and not _send(conn, mutator, run, selector):
                    close(conn, reset=False)
    finally:
        for conn in list(open_.values()):
            close(conn, reset=True)
        selector.close()
    return run


def _receive(conn: _Connection) -> bool:
    try:
        data = conn.sock.recv(1 << 18)
    except BlockingIOError:
        return True
    except OSError:
        return False
    if not data:
        return False
    conn.read_answers(data)
    conn.last_progress = time.monotonic()
    return True


def _send(
    conn: _Connection, mutator: Mutator, run: FuzzRun, selector: selectors.BaseSelector
) -> bool:
    while conn.left > 0 and conn.due - conn.answered < WINDOW and len(conn.out) < 1 << 14:
        conn.left -= 1
        if conn.left == 0:
            conn.out += closing_frame()
            break
        mutation = mutator.mutate(conn.rng)
        conn.out += mutation.frame
        conn.due += mutation.answered
        run.sent += 1
        if mutation.lying:
            conn.left, conn.lying = 0, True
        elif mutation.raw:
            conn.left = 1  # the closing frame is next
    if conn.out:
        try:
            written = conn.sock.send(conn.out)
        except BlockingIOError:
            written = 0
        except OSError:
            return False
        del conn.out[:written]
        if written:
            conn.last_progress = time.monotonic()
    if not conn.out and conn.left == 0:
        if conn.lying:  # the broker waits for bytes that never come: end them
            try:
                conn.sock.shutdown(socket.SHUT_WR)
            except OSError:
                return False
        selector.modify(conn.sock, selectors.EVENT_READ, conn)
    return True


# --- the fuzzer's own process ---------------------------------------------------------------


def _fire_in_child(
    address: tuple[str, int],
    corpus: list[bytes],
    seed: int,
    stop: EventType,
    results: Connection,
) -> None:
    """:func:`fire` in a process of its own, so that making frames takes no time from the
    broker's threads (one interpreter lock serves them all); until ``stop`` is set."""
    try:
        results.send(fire(address, Mutator(corpus), seed, stop.is_set))
    except BaseException:
        results.send(traceback.format_exc())
        raise
    finally:
        results.close()


@contextlib.contextmanager
def fuzzing(address: tuple[str, int], corpus: list[bytes], seed: int) -> Iterator[FuzzResult]:
    """Fires mutated frames at ``address`` from a child process while the block runs."""
    context = multiprocessing.get_context("spawn")  # never fork a process with broker threads
    stop = context.Event()
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(
        target=_fire_in_child,
        args=(address, corpus, seed, stop, sending),
        name="fuzzer",
        daemon=True,
    )
    result = FuzzResult()
    child.start()
    sending.close()
    try:
        result.child = child
        yield result
    finally:
        stop.set()
        try:
            answer = receiving.recv() if receiving.poll(60) else None
        except EOFError:  # it died without a word
            answer = None
        finally:
            receiving.close()
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
                child.join()
        if isinstance(answer, str):
            raise AssertionError(f"the fuzzer failed:\n{answer}")
        result.run = answer


@attrs.define
class FuzzResult:
    child: Any = None
    run: FuzzRun | None = None

    def alive(self) -> bool:
        return bool(self.child is not None and self.child.is_alive())


# --- what the broker logs --------------------------------------------------------------------


@attrs.frozen
class BrokerLog:
    """What the broker logged, summed up: tens of thousands of lines say little one by one."""

    by_level: Counter[str]
    #: The listener's warnings for closed connections, by what they say, numbers left out.
    closes: Counter[str]
    #: The listener's warnings for requests answered with a malformed-request error code.
    refusals: int
    without_peer: list[str]
    #: An exception with a traceback, by where it came from: a request a handler did not
    #: expect, or a listener failure.
    tracebacks: dict[str, str]

    @classmethod
    def of(cls, records: Sequence[logging.LogRecord]) -> BrokerLog:
        by_level: Counter[str] = Counter()
        closes: Counter[str] = Counter()
        refusals = 0
        without_peer: list[str] = []
        tracebacks: dict[str, str] = {}
        for record in records:
            if not record.name.startswith("tierlog"):
                continue
            by_level[record.levelname] += 1
            message = record.getMessage()
            if record.name == "tierlog.wire.listener" and record.levelno >= logging.WARNING:
                if "closing connection" in message:
                    closes[re.sub(r"-?\d+", "N", message.split(": ", 2)[-1])[:80]] += 1
                else:
                    refusals += 1
                if "from 127.0.0.1:" not in message:
                    without_peer.append(message)
            if record.exc_info is not None and record.exc_info[1] is not None:
                error = record.exc_info[1]
                where = re.sub(r"127\.0\.0\.1:\d+", "<peer>", f"{message}: {error!r}")[:200]
                trace = traceback.format_list(traceback.extract_tb(record.exc_info[2])[-4:])
                tracebacks.setdefault(where, f"{message}\n{''.join(trace)}")
        return cls(by_level, closes, refusals, without_peer[:10], tracebacks)

    def report(self, run: FuzzRun) -> str:
        lines = ["the broker logged exceptions for hostile frames:"]
        for where, detail in self.tracebacks.items():
            port = re.search(r"127\.0\.0\.1:(\d+)", detail)
            index = run.ports.get(int(port.group(1))) if port else None
            seed = f"connection {index}: Random('{SEED}:{index}')" if index is not None else ""
            lines.append(f"- {where} {seed}\n{detail}")
        return "\n".join(lines)


# --- the test --------------------------------------------------------------------------------


def _wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.slow
def test_a_hundred_thousand_mutated_frames_leave_the_broker_serving_and_every_record_kept(
    make_listening: Callable[..., EmbeddedCluster],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.WARNING, logger="tierlog")
    with recording(make_listening) as (recorded, proxy):
        Admin(recorded.transport).create_topics([NewTopic("corpus", 2, 1)])
        recorded_frames = record_client_frames(proxy, "corpus")
    recorded_apis = {frame.api_key for frame in recorded_frames}
    assert recorded_apis >= GROUP_APIS, f"no seed for API keys {GROUP_APIS - recorded_apis}"
    corpus = [frame.data for frame in first_of_each_kind(recorded_frames + inter_broker_frames())]
    (tmp_path / "corpus").write_bytes(b"".join(_framed(frame) for frame in corpus))
    Mutator(corpus)  # fails here, not in the fuzzer's process, if no frame decodes

    cluster = make_listening(
        request_timeout_ms=REQUEST_TIMEOUT_MS, log_retention_check_interval_ms=500
    )
    Admin(cluster.transport).create_topics(
        [NewTopic("corpus", 2, 1, configs=CORPUS_TOPIC), NewTopic("kept", 3, 1)]
    )
    # Fetches of the corpus find data at the offsets real clients read, instead of long-polling,
    # until retention (CORPUS_TOPIC) moves the log start past them: then they are out of range.
    produce_acked(cluster, "corpus", 2, 1000)
    kept = produce_acked(cluster, "kept", 3, 300)
    assert read_back(cluster, "kept", 3) == kept
    bound = cluster.listener(0).bound[0]
    # A node of a multi-process cluster decodes the inter-broker APIs too; it runs no controller
    # and takes no pushed metadata, so those answer NOT_CONTROLLER and INVALID_REQUEST.
    cluster.broker(0).inter_broker_enabled = True
    assert cluster.controller.image().controller_epoch > 0

    def delivered() -> int:
        meter = cluster.metric(0, "socket-server-metrics", "request-rate", listener="PLAINTEXT")
        assert isinstance(meter, dict)
        return int(meter["count"])

    caplog.clear()
    threads = threading.active_count()
    names_before = {thread.name for thread in threading.enumerate()}
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    before, started = delivered(), time.monotonic()
    with fuzzing((bound.host, bound.port), corpus, SEED) as fuzz:
        while delivered() - before < FRAMES and fuzz.alive():
            time.sleep(0.1)
    frames, fuzzed_s = delivered() - before, time.monotonic() - started
    run = fuzz.run
    assert run is not None, "the fuzzer sent no report"
    broker_log = BrokerLog.of(caplog.records)
    caplog.clear()  # a failure below shows the summary, not thousands of lines

    assert frames >= FRAMES, run
    assert not broker_log.tracebacks, broker_log.report(run)
    assert not broker_log.without_peer, broker_log.without_peer
    assert broker_log.by_level["ERROR"] + broker_log.by_level["CRITICAL"] == 0, broker_log
    # A bad frame is logged once, and closes its connection; a refused request, once.
    assert sum(broker_log.closes.values()) <= run.connections, broker_log.closes.most_common(9)
    assert broker_log.refusals <= frames

    assert _wait_for(lambda: threading.active_count() <= threads + 2), (
        f"{threading.active_count()} threads, {threads} before the fuzz; new: "
        f"{sorted({t.name for t in threading.enumerate()} - names_before)}"
    )
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_kib) / 1024
    assert grown_mib < 200, f"peak memory grew by {grown_mib:.0f} MiB"

    # Every acknowledged record is still there, in order, and a fresh client works.
    assert read_back(cluster, "kept", 3) == kept
    Admin(cluster.transport).create_topics([NewTopic("after", 1, 1)])
    written = produce_acked(cluster, "after", 1, 10)
    assert read_back(cluster, "after", 1) == written
    print(
        f"\n{frames} frames in {fuzzed_s:.0f} s over {run.connections} connections "
        f"({run.sent} sent, {run.abandoned} abandoned), peak memory +{grown_mib:.0f} MiB; "
        f"broker log: "
        f"{sum(broker_log.closes.values())} closed, {broker_log.refusals} refused, "
        f"{dict(broker_log.by_level)}"
    )
