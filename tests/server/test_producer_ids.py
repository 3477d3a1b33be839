"""InitProducerId and the controller's blocks of producer ids (KIP-730)."""

from __future__ import annotations

import json
from pathlib import Path

from tierlog.cluster import EmbeddedCluster
from tierlog.coordination.file_store import METADATA_FILE
from tierlog.errors import InvalidRequestError
from tierlog.server import protocol as p
from tierlog.server.producer_ids import PRODUCER_ID_BLOCK_SIZE


def init(cluster: EmbeddedCluster, broker_id: int, **fields: object) -> p.InitProducerIdResponse:
    return cluster.transport.send(broker_id, p.InitProducerIdRequest(**fields))


def new_id(cluster: EmbeddedCluster, broker_id: int) -> int:
    answer = init(cluster, broker_id)
    assert answer.error_code == p.NONE
    assert answer.producer_epoch == 0
    return answer.producer_id


def persisted_next_id(data_dir: Path) -> int:
    data = json.loads((data_dir / "controller" / METADATA_FILE).read_text())
    return int(data["next_producer_id"])


def test_every_broker_hands_out_ids_from_its_own_block(cluster: EmbeddedCluster) -> None:
    ids = {b: [new_id(cluster, b) for _ in range(5)] for b in cluster.broker_ids}

    everything = [i for per_broker in ids.values() for i in per_broker]
    assert len(set(everything)) == len(everything)
    for per_broker in ids.values():
        assert per_broker == list(range(per_broker[0], per_broker[0] + 5))
        assert per_broker[0] % PRODUCER_ID_BLOCK_SIZE == 0
    assert persisted_next_id(cluster.data_dir) == 3 * PRODUCER_ID_BLOCK_SIZE


def test_a_spent_block_is_followed_by_a_new_one(cluster: EmbeddedCluster) -> None:
    first_block = [new_id(cluster, 0) for _ in range(PRODUCER_ID_BLOCK_SIZE)]
    other = new_id(cluster, 1)
    after = new_id(cluster, 0)

    assert first_block == list(range(PRODUCER_ID_BLOCK_SIZE))
    assert other == PRODUCER_ID_BLOCK_SIZE
    assert after == 2 * PRODUCER_ID_BLOCK_SIZE
    assert persisted_next_id(cluster.data_dir) == 3 * PRODUCER_ID_BLOCK_SIZE


def test_ids_are_never_given_twice_across_restarts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seen: list[int] = []
    with EmbeddedCluster(3, data) as cluster:
        seen.extend(new_id(cluster, b) for b in cluster.broker_ids for _ in range(3))
        # The next block's start is on disk before any id of this block left the broker: a
        # controller crash now could not give these ids again.
        assert persisted_next_id(data) > max(seen)
    with EmbeddedCluster(3, data) as cluster:
        seen.extend(new_id(cluster, b) for b in cluster.broker_ids for _ in range(3))
    with EmbeddedCluster(1, data) as cluster:
        seen.extend(new_id(cluster, 0) for _ in range(3))

    assert len(set(seen)) == len(seen) == 21


def test_a_bump_with_the_current_id_gets_a_fresh_id(cluster: EmbeddedCluster) -> None:
    first = new_id(cluster, 0)

    bumped = init(cluster, 0, producer_id=first, producer_epoch=0)

    assert bumped.error_code == p.NONE
    assert bumped.producer_id != first
    assert bumped.producer_epoch == 0


def test_a_transactional_id_is_refused_for_good(cluster: EmbeddedCluster) -> None:
    answer = init(cluster, 0, transactional_id="txn", transaction_timeout_ms=60_000)

    assert answer.error_code == InvalidRequestError.code
    assert (answer.producer_id, answer.producer_epoch) == (-1, -1)


def test_an_id_without_an_epoch_is_an_invalid_request(cluster: EmbeddedCluster) -> None:
    assert init(cluster, 0, producer_id=5).error_code == InvalidRequestError.code
    assert init(cluster, 0, producer_epoch=5).error_code == InvalidRequestError.code
    assert init(cluster, 0, producer_id=5, producer_epoch=1 << 15).error_code == (
        InvalidRequestError.code
    )
