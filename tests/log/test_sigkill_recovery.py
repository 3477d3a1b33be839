"""Crash safety: a writer process is killed with SIGKILL at random moments, again and again.

Each cycle starts a writer (``sigkill_writer.py``) on the same log directory, lets it append and
flush for a random while, and kills it. The test then opens the log (an unclean start, so it
recovers) and checks that every batch the writer acknowledged after a flush is there,
byte for byte, that offsets run without gaps, that every batch served passes its CRC, and that
the producer state knows the last acknowledged sequence of every writer.
"""

from __future__ import annotations

import hashlib
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tierlog.log import FetchIsolation, PartitionLog, files
from tierlog.records import RecordBatch, set_base_offset, set_partition_leader_epoch

from .sigkill_writer import CONFIG, producer_id, writer_batch

WRITER = Path(__file__).with_name("sigkill_writer.py")
CYCLES = 60
_READY_TIMEOUT_S = 60.0


def _acknowledged(ack_file: Path) -> list[tuple[int, int, int, int, int]]:
    """The complete ack lines (a line cut by the kill was never acknowledged)."""
    text = ack_file.read_text()
    lines = text.split("\n")[:-1]  # the part after the last newline is incomplete
    return [
        tuple(int(field) for field in line.split())  # type: ignore[misc]
        for line in lines
        if line != "ready"
    ]


def _run_writer_until_killed(log_dir: Path, ack_file: Path, cycle: int, rng: random.Random) -> None:
    ack_file.unlink(missing_ok=True)
    process = subprocess.Popen(
        [sys.executable, str(WRITER), str(log_dir), str(ack_file), str(cycle)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while not (ack_file.exists() and ack_file.read_bytes().startswith(b"ready\n")):
            if process.poll() is not None:
                raise AssertionError(f"writer exited early: {process.stderr.read()!r}")  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "writer never became ready"
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.3))
        assert process.poll() is None, f"writer died: {process.stderr.read()!r}"  # type: ignore[union-attr]
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert process.stderr is not None
        process.stderr.close()


def _verify(
    log: PartitionLog, acks: list[tuple[int, int, int, int, int]], expected: dict[int, bytes]
) -> None:
    """Checks the whole log against every ack so far; ``expected`` memoizes batch digests."""
    stored: dict[int, bytes] = {}
    expected_offset = log.log_start_offset
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20, FetchIsolation.LOG_END)
        view = memoryview(info.records)
        assert len(view), f"nothing read at {offset} below the log end {log.log_end_offset}"
        position = 0
        while position < len(view):
            batch = RecordBatch.parse(view, position)
            batch.validate()  # no corrupt batch is ever served
            assert batch.base_offset == expected_offset, "offsets must have no gaps"
            stored[batch.base_offset] = hashlib.sha256(batch.raw).digest()
            expected_offset = batch.next_offset
            position = batch.end_position
        offset = expected_offset
    assert expected_offset == log.log_end_offset

    last_sequence: dict[int, int] = {}
    for cycle, n, sequence, first_offset, last_offset in acks:
        if first_offset not in expected:
            data = writer_batch(cycle, n, sequence)
            set_base_offset(data, first_offset)
            set_partition_leader_epoch(data, cycle)
            expected[first_offset] = hashlib.sha256(data).digest()
        assert stored.get(first_offset) == expected[first_offset], (
            f"acknowledged batch {n} of writer {cycle} at offset {first_offset} is lost or changed"
        )
        last_sequence[cycle] = sequence + last_offset - first_offset
    producers = log.producer_state_manager
    for cycle, sequence in last_sequence.items():
        entry = producers.last_entry(producer_id(cycle))
        assert entry is not None and entry.last_seq >= sequence


def test_no_flushed_batch_is_lost_and_no_corrupt_batch_is_served(tmp_path: Path) -> None:
    log_dir = tmp_path / "crash-0"
    ack_file = tmp_path / "acks"
    rng = random.Random(20240601)
    all_acks: list[tuple[int, int, int, int, int]] = []
    acknowledged_cycles = 0
    expected: dict[int, bytes] = {}
    for cycle in range(CYCLES):
        _run_writer_until_killed(log_dir, ack_file, cycle, rng)
        acks = _acknowledged(ack_file)
        acknowledged_cycles += bool(acks)
        all_acks.extend(acks)
        assert not (log_dir / files.CLEAN_SHUTDOWN_MARKER).exists()
        log = PartitionLog.open(log_dir, CONFIG)
        try:
            _verify(log, all_acks, expected)
        finally:
            log.close()
    # The kills must really have landed while batches were being written.
    assert acknowledged_cycles > CYCLES // 2
    assert len(all_acks) > CYCLES
