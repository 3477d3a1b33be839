"""Each library produces (acks=all, every codec, idempotent or not) and reads its own records
back by assign() from the earliest offset: every byte, in per-partition order."""

from __future__ import annotations

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.records import Compression

from .conftest import (
    COMPRESSIONS,
    EARLIEST,
    LIBRARIES,
    assert_same_records,
    consume,
    create_topic,
    end_offsets,
    make_records,
    on,
    produce,
    stored_batches,
    unique_topic,
)

PARTITIONS = 3


def _cases() -> list[object]:
    cases: list[object] = []
    for library in LIBRARIES:
        for compression in COMPRESSIONS:
            cases.append(pytest.param(library, compression, id=f"{library}-{compression}"))
    return cases


@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idem"])
@pytest.mark.parametrize(("library", "compression"), _cases())
def test_produced_records_read_back_byte_exact_in_order(
    shared_cluster: EmbeddedCluster, library: str, compression: str, idempotence: bool
) -> None:
    topic = unique_topic()
    create_topic(shared_cluster, topic, PARTITIONS)
    bootstrap = shared_cluster.bootstrap_servers
    records = make_records(240, PARTITIONS, tag=f"{library}-{compression}")

    acked = produce(
        library, bootstrap, topic, records, compression=compression, idempotence=idempotence
    )

    assert len(acked) == len(records)
    ends = end_offsets(acked)
    assert ends == on(topic, dict.fromkeys(range(PARTITIONS), len(records) // PARTITIONS))
    starts = on(topic, dict.fromkeys(range(PARTITIONS), EARLIEST))
    assert_same_records(consume(library, bootstrap, starts, ends), acked)
    # What the broker stores says the codec and idempotence were really in use.
    for partition in range(PARTITIONS):
        batches = stored_batches(shared_cluster, topic, partition)
        assert {b.producer_id >= 0 for b in batches} == {idempotence}
        assert {b.compression for b in batches} == {Compression.from_name(compression)}
