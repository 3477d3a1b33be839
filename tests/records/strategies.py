"""Hypothesis strategies and helpers shared by the record tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from tierlog.records import Compression, RecordBatchBuilder

timestamps = st.one_of(st.just(-1), st.integers(min_value=0, max_value=(1 << 63) - 1))
#: Timestamps near each other, as real batches have (small deltas exercise the short varints).
near_timestamps = st.integers(min_value=1_600_000_000_000, max_value=1_600_000_100_000)
nullable_bytes = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=20), nullable_bytes), max_size=4).map(tuple)
record_specs = st.tuples(
    st.one_of(near_timestamps, timestamps), nullable_bytes, nullable_bytes, headers
)
codecs = st.sampled_from(list(Compression))


@st.composite
def batches(
    draw: st.DrawFn, compression: st.SearchStrategy[Compression] = codecs
) -> tuple[bytes, dict[str, Any], list[tuple[Any, ...]]]:
    """A valid batch, the builder arguments it was made with, and its record specs."""
    specs = draw(st.lists(record_specs, min_size=1, max_size=25))
    producer_id = draw(st.one_of(st.just(-1), st.integers(0, (1 << 63) - 1)))
    kwargs: dict[str, Any] = {
        "compression": draw(compression),
        "base_offset": draw(st.integers(0, (1 << 62))),
        "partition_leader_epoch": draw(st.integers(-1, (1 << 31) - 1)),
        "producer_id": producer_id,
        "producer_epoch": -1 if producer_id < 0 else draw(st.integers(0, (1 << 15) - 1)),
        "base_sequence": -1 if producer_id < 0 else draw(st.integers(0, (1 << 31) - 1)),
        "is_transactional": producer_id >= 0 and draw(st.booleans()),
    }
    builder = RecordBatchBuilder(**kwargs)
    for timestamp, key, value, record_headers in specs:
        builder.append(timestamp, key, value, record_headers)
    return builder.build(), kwargs, specs


def build(
    specs: list[tuple[Any, ...]], compression: Compression = Compression.NONE, **kwargs: Any
) -> bytes:
    """A batch of ``specs`` (timestamp, key, value, headers) built with our builder."""
    builder = RecordBatchBuilder(compression, **kwargs)
    for timestamp, key, value, record_headers in specs:
        builder.append(timestamp, key, value, record_headers)
    return builder.build()
