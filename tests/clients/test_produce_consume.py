"""Each library produces (acks=all, every codec, idempotent or not) and reads its own records
back by assign() from the earliest offset: every byte, in per-partition order."""

from __future__ import annotations

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.records import Compression
from tierlog.wire import APIS

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

FIND_COORDINATOR = 10
INIT_PRODUCER_ID = 22

#: An idempotent producer starts with InitProducerId; without it every client gives up.
needs_init_producer_id = pytest.mark.xfail(
    INIT_PRODUCER_ID not in APIS, reason="InitProducerId not served yet", strict=False
)

#: librdkafka takes FindCoordinator being advertised as the sign that a broker reads LZ4
#: (rdkafka_feature.c); without it, it sends lz4 batches uncompressed, silently.
lz4_needs_find_coordinator = pytest.mark.xfail(
    FIND_COORDINATOR not in APIS,
    reason="librdkafka disables LZ4 unless FindCoordinator (API 10) is advertised",
    strict=True,
)

PARTITIONS = 3


def _cases() -> list[object]:
    cases: list[object] = []
    for library in LIBRARIES:
        for compression in COMPRESSIONS:
            librdkafka_lz4 = library == "confluent-kafka" and compression == "lz4"
            marks = [lz4_needs_find_coordinator] if librdkafka_lz4 else []
            case_id = f"{library}-{compression}"
            cases.append(pytest.param(library, compression, marks=marks, id=case_id))
    return cases


@pytest.mark.parametrize(
    "idempotence", [False, pytest.param(True, marks=needs_init_producer_id)], ids=["plain", "idem"]
)
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
