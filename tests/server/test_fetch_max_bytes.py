"""``fetch.max.bytes``: a consumer's fetch response is capped by the broker, whatever it asks."""

from __future__ import annotations

from pathlib import Path

from tierlog.cluster import EmbeddedCluster
from tierlog.server import protocol as p

from .conftest import Client, batch, offsets


def test_a_consumer_asking_for_more_than_fetch_max_bytes_gets_at_most_that(
    tmp_path: Path,
) -> None:
    with EmbeddedCluster(1, tmp_path, {"fetch.max.bytes": "1024"}) as cluster:
        client = Client(cluster)
        client.create("t")
        for n in range(4):
            assert client.produce("t", 0, batch(5, tag=f"b{n}", value_size=100)).error_code == 0
        huge = 1 << 30
        request = p.FetchRequest(
            [p.FetchTopic("t", [p.FetchPartition(0, 0, huge)])], max_bytes=huge
        )
        (answer,) = cluster.transport.send(0, request).responses[0].partitions
        assert answer.error_code == p.NONE
        assert 0 < len(answer.records) <= 1024  # whole batches, the first always
        assert offsets(answer.records)[0] == 0
        assert len(offsets(answer.records)) < 20  # not the whole log
