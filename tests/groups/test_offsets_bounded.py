"""``__consumer_offsets`` stays bounded: a million offset commits of 100 groups, sent over the
listener and cleaned by the broker's own cleaner thread while they arrive, leave a partition the
size of its live keys, and every group still fetches exactly its latest commits."""

from __future__ import annotations

from collections.abc import Callable

from tierlog.cluster import EmbeddedCluster
from tierlog.model import TopicPartition
from tierlog.server.internal_topics import CONSUMER_OFFSETS_TOPIC

from .conftest import connect, create_topic, groups_ready

GROUPS = 100
PARTITIONS = 100
ROUNDS = 100  # GROUPS * PARTITIONS * ROUNDS = 1,000,000 commits
SEGMENT_BYTES = 1024 * 1024


def test_a_million_commits_leave_the_offsets_topic_bounded(
    make_cluster: Callable[..., EmbeddedCluster],
) -> None:
    cluster = groups_ready(
        make_cluster(
            offsets_topic_num_partitions="1",
            offsets_topic_segment_bytes=str(SEGMENT_BYTES),
            log_cleaner_backoff_ms="50",
        )
    )
    create_topic(cluster, "orders", PARTITIONS)
    groups = [f"group-{n:03d}" for n in range(GROUPS)]
    offsets_log = cluster.broker(0).partition(TopicPartition(CONSUMER_OFFSETS_TOPIC, 0))
    assert offsets_log is not None
    sizes = []
    with connect(cluster) as client:
        for round_ in range(ROUNDS):
            for n, group in enumerate(groups):
                answer = client.commit(
                    group, {("orders", p): round_ * 1000 + n + p for p in range(PARTITIONS)}
                )
                assert set(answer.values()) == {0}, answer
            sizes.append(offsets_log.log.size)
        final = {group: client.fetch_offsets(group) for group in groups}
    for n, group in enumerate(groups):
        error, committed = final[group]
        assert error == 0
        assert {tp: offset for tp, (offset, _, _) in committed.items()} == {
            ("orders", p): (ROUNDS - 1) * 1000 + n + p for p in range(PARTITIONS)
        }
    history = offsets_log.log.log_end_offset  # every commit is one record
    assert history >= GROUPS * PARTITIONS * ROUNDS
    # The history is about 57 MB; 10,000 live keys take about 0.6 MB, and the rest is what the
    # dirty ratio lets wait plus the active segment. The partition never grows with the commits.
    assert max(sizes) < 4 * SEGMENT_BYTES, sizes
    second_half = sizes[ROUNDS // 2 :]
    assert max(second_half) < 2 * max(sizes[ROUNDS // 4 : ROUNDS // 2]), sizes
