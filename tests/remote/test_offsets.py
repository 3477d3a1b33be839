"""ListOffsets across both tiers: the special timestamps and searches by time."""

from __future__ import annotations

from collections.abc import Callable

from tierlog.server import protocol as p

from tests.server.conftest import T0, batch
from tests.waiting import wait_until

from .conftest import Tiered

T = T0 - 60_000


def test_list_offsets_across_tiers(make_tiered: Callable[..., Tiered]) -> None:
    tiered = make_tiered(1)
    tiered.client.create(
        "t",
        segment_bytes="4096",
        remote_storage_enable="true",
        local_retention_bytes="1",
    )
    # batch n holds offsets 10n..10n+9 with timestamps T + 1000n + i; batch 3 is the newest
    for n in range(30):
        stamp = T + 1000 * n if n != 3 else T + 30_000
        assert (
            tiered.client.produce("t", 0, batch(10, timestamp=stamp, value_size=100)).error_code
            == 0
        )
    plog = tiered.log("t")
    wait_until(lambda: plog.segment_count == 1, "every rolled segment only remote")
    local_start = plog.local_log_start_offset
    tiered_end = plog.highest_offset_in_remote_storage

    def listed(spec: int) -> p.ListOffsetsPartitionResponse:
        answer = tiered.client.list_offset("t", spec)
        assert answer.error_code == p.NONE
        return answer

    assert listed(p.OffsetSpec.EARLIEST).offset == 0
    assert listed(p.OffsetSpec.LATEST).offset == 300
    assert listed(p.OffsetSpec.EARLIEST_LOCAL).offset == local_start
    assert listed(p.OffsetSpec.LATEST_TIERED).offset == tiered_end
    newest = listed(p.OffsetSpec.MAX_TIMESTAMP)
    assert (newest.offset, newest.timestamp) == (39, T + 30_009)
    # by time: inside the remote tier, then in the local one
    remote_hit = listed(T + 1000 * 2 + 5)
    assert (remote_hit.offset, remote_hit.timestamp) == (25, T + 2005)
    # the first record at or after the time in offset order: batch 3, remote, not batch 28
    assert listed(T + 1000 * 28 + 2).offset == 30
    assert listed(T + 40_000).offset == -1
    tiered.client.produce("t", 0, batch(1, timestamp=T + 50_000, value_size=100))
    assert listed(T + 40_000).offset == 300  # found in the local tier
    assert tiered.history.of("fetch_index")
