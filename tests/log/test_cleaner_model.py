"""The cleaner against a reference model: after any sequence of keyed writes, tombstones, rolls,
cleans and reopens, the log holds exactly the latest record of each key below where the cleaner
reached (a tombstone until its delete horizon), everything above it untouched, at the offsets
the records were written at."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tierlog.log import PartitionLog
from tierlog.log.cleaner import LogCleaner
from tierlog.records import Compression

from .cleaner_support import COMPACTED, Entry, cleaner_for, entries, keyed, transient_files
from .support import Clock, open_log

RETENTION = COMPACTED["delete.retention.ms"]
assert isinstance(RETENTION, int)

KEYS = [f"key-{i}".encode() for i in range(6)]
_value = st.one_of(st.none(), st.binary(min_size=1, max_size=40))
_write = st.tuples(
    st.just("write"),
    st.lists(st.tuples(st.sampled_from(KEYS), _value), min_size=1, max_size=4),
    st.sampled_from([Compression.NONE, Compression.GZIP]),
)
_op = st.one_of(
    _write,
    _write,
    _write,
    st.tuples(st.just("roll")),
    st.tuples(st.just("clean"), st.sampled_from([0, RETENTION // 2, RETENTION])),
    st.tuples(st.just("reopen")),
)


class Model:
    """What the log must hold: every write, less what each clean may drop."""

    def __init__(self) -> None:
        self.writes: dict[int, tuple[bytes, bytes | None]] = {}
        #: When a clean first kept each tombstone (its delete horizon counts from there).
        self.first_pass: dict[int, int] = {}
        self.removed: set[int] = set()

    def cleaned(self, end: int, now: int) -> None:
        """A clean reached ``end`` at ``now``: below it only each key's latest record stays, a
        tombstone until ``delete.retention.ms`` after the clean that first kept it."""
        latest: dict[bytes, int] = {}
        for offset, (key, _) in self.writes.items():
            if offset < end:
                latest[key] = max(latest.get(key, -1), offset)
        kept = set(latest.values())
        self.removed.update(o for o in self.writes if o < end and o not in kept)
        for offset in sorted(kept):
            if self.writes[offset][1] is not None or offset in self.removed:
                continue
            if offset not in self.first_pass:
                self.first_pass[offset] = now
            elif now >= self.first_pass[offset] + RETENTION:
                self.removed.add(offset)

    def expected(self) -> list[Entry]:
        return [
            (offset, key, value)
            for offset, (key, value) in sorted(self.writes.items())
            if offset not in self.removed
        ]


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(_op, max_size=60))
def test_a_cleaned_log_matches_the_model(ops: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "compacted-0"
        clock = Clock()
        holder = [open_log(directory, COMPACTED, clock)]
        cleaner = cleaner_for(lambda: holder, clock)
        model = Model()
        try:
            for op in [*ops, ("roll",), ("clean", 0), ("clean", RETENTION), ("roll",)]:
                _apply(op, holder, cleaner, model, clock, directory)
                assert entries(holder[0]) == model.expected()
            offsets = [entry[0] for entry in entries(holder[0])]
            assert offsets == sorted(set(offsets))
        finally:
            holder[0].close()
        reopened = open_log(directory, COMPACTED, clock)
        try:
            assert entries(reopened) == model.expected()
            assert transient_files(directory) == []
        finally:
            reopened.close()


def _apply(
    op: tuple[object, ...],
    holder: list[PartitionLog],
    cleaner: LogCleaner,
    model: Model,
    clock: Clock,
    directory: Path,
) -> None:
    plog = holder[0]
    kind = op[0]
    if kind == "write":
        pairs = op[1]
        compression = op[2]
        assert isinstance(pairs, list) and isinstance(compression, Compression)
        info = plog.append_as_leader(keyed(pairs, compression=compression), 0)
        for i, (key, value) in enumerate(pairs):
            model.writes[info.first_offset + i] = (key, value)
        plog.update_high_watermark(plog.log_end_offset)
    elif kind == "roll":
        plog.roll()
    elif kind == "clean":
        advance = op[1]
        assert isinstance(advance, int)
        clock.advance(advance)
        before = plog.cleaner_checkpoint
        if cleaner.clean_once():
            end = plog.cleaner_checkpoint
            assert end is not None and (before is None or end >= before)
            model.cleaned(end, clock.now)
    elif kind == "reopen":
        plog.close()
        holder[0] = open_log(directory, COMPACTED, clock)
