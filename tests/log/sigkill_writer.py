"""The writer process of the SIGKILL recovery test, and the batches it writes.

Run as ``python sigkill_writer.py LOG_DIR ACK_FILE CYCLE``: opens the partition log, writes
``ready`` to the ack file, then appends batches as an idempotent producer until it is killed. The
log flushes after every append (``flush.messages=1``), and only then is the batch acknowledged
with a line in the ack file. The test imports
``writer_batch`` to rebuild exactly the bytes each acknowledged batch must have in the log
(``<cycle> <n> <base sequence> <first offset> <last offset>`` says which).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from tierlog.log import PartitionLog
from tierlog.records import Compression, RecordBatchBuilder

#: Small segments and a dense index, so that kills land in rolls, snapshots and index writes.
CONFIG = {
    "segment.bytes": 256 * 1024,
    "index.interval.bytes": 1024,
    "segment.index.bytes": 4096,
    "flush.messages": 1,
    # The record timestamps are fixed (the test rebuilds the bytes), so producers must not expire.
    "producer.id.expiration.ms": 100 * 365 * 86_400_000,
}
PRODUCER_BASE = 1000
T0 = 1_700_000_000_000


def producer_id(cycle: int) -> int:
    return PRODUCER_BASE + cycle


def writer_batch(cycle: int, n: int, sequence: int) -> bytearray:
    """Batch ``n`` of writer ``cycle`` at ``sequence``: from bytes to 600 KB, every codec."""
    rng = random.Random(cycle * 1_000_003 + n)
    codec = list(Compression)[rng.randrange(len(Compression))]
    builder = RecordBatchBuilder(
        codec, producer_id=producer_id(cycle), producer_epoch=0, base_sequence=sequence
    )
    big = rng.random() < 0.03  # large enough that a kill can land inside its write
    for i in range(rng.randint(1, 4) if big else rng.randint(1, 8)):
        size = rng.randint(20_000, 150_000) if big else rng.randint(1, 1000)
        builder.append(T0 + cycle * 10_000 + n, f"{cycle}-{n}-{i}".encode(), rng.randbytes(size))
    return bytearray(builder.build())


def main(log_dir: str, ack_file: str, cycle: int) -> None:
    log = PartitionLog.open(Path(log_dir), CONFIG)
    ack = os.open(ack_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(ack, b"ready\n")
    sequence = 0
    n = 0
    while True:
        info = log.append_as_leader(writer_batch(cycle, n, sequence), leader_epoch=cycle)
        os.write(ack, f"{cycle} {n} {sequence} {info.first_offset} {info.last_offset}\n".encode())
        sequence += info.last_offset - info.first_offset + 1
        n += 1


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
