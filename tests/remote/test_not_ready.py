"""KIP-1007: while a partition's remote metadata loads, only what needs it fails, retriably."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import attrs
from tierlog import hookimpl
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import error_for_code
from tierlog.server import protocol as p

from tests.server.conftest import Client, batch, offsets
from tests.waiting import wait_until

from .conftest import tiered_settings


class Readiness:
    """Wraps the metadata manager's readiness, as a manager rebuilding its state would answer."""

    def __init__(self) -> None:
        self.ready = True

    @hookimpl(wrapper=True)
    def tierlog_is_ready(self, topic_id_partition: Any) -> Generator[None, Any, Any]:
        result = yield
        return result and self.ready


def test_only_partitions_needing_remote_metadata_fail_while_it_loads(tmp_path: Path) -> None:
    readiness = Readiness()
    settings = tiered_settings(tmp_path / "remote")
    with EmbeddedCluster(1, tmp_path / "data", settings, extra_plugins={"ready": readiness}) as c:
        client = Client(c)
        client.create(
            "t", segment_bytes="4096", remote_storage_enable="true", local_retention_bytes="1"
        )
        client.create("local")
        for n in range(30):
            assert client.produce("t", 0, batch(10, tag=f"b{n}", value_size=100)).error_code == 0
        assert client.produce("local", 0, batch(5)).error_code == 0
        broker = c.broker(0)
        plog = broker.partition(next(tp for tp in broker.hosted_partitions() if tp.topic == "t"))
        assert plog is not None
        wait_until(lambda: plog.log.local_log_start_offset > 50, "local copies deleted")
        # The active segment is never tiered or deleted: its offsets stay local.
        local_start = plog.log.segments()[-1].base_offset

        readiness.ready = False
        request = p.FetchRequest(
            [
                p.FetchTopic("t", [p.FetchPartition(0, 0, 1 << 20)]),
                p.FetchTopic("local", [p.FetchPartition(0, 0, 1 << 20)]),
            ],
            max_wait_ms=0,
        )
        remote, local = (t.partitions[0] for t in c.transport.send(0, request).responses)
        assert error_for_code(remote.error_code).retriable
        assert local.error_code == p.NONE and len(offsets(local.records)) == 5
        assert client.fetch("t", 0, local_start).error_code == p.NONE  # local data is served
        listed = client.list_offset("t", p.OffsetSpec.EARLIEST)
        assert error_for_code(listed.error_code).retriable

        readiness.ready = True
        assert offsets(client.fetch("t", 0, 0).records)[0] == 0
        assert client.list_offset("t", p.OffsetSpec.EARLIEST).offset == 0


def test_a_fetch_with_nothing_else_to_return_waits_for_readiness_instead_of_failing_at_once(
    tmp_path: Path,
) -> None:
    """KAFKA-19599: answering REPLICA_NOT_AVAILABLE at once makes clients retry in a tight loop;
    the fetch is held up to its max_wait_ms, and served if the partition becomes ready."""
    readiness = Readiness()
    settings = tiered_settings(tmp_path / "remote")
    with EmbeddedCluster(1, tmp_path / "data", settings, extra_plugins={"ready": readiness}) as c:
        client = Client(c)
        client.create(
            "t", segment_bytes="4096", remote_storage_enable="true", local_retention_bytes="1"
        )
        for n in range(30):
            assert client.produce("t", 0, batch(10, tag=f"b{n}", value_size=100)).error_code == 0
        broker = c.broker(0)
        plog = broker.partition(next(tp for tp in broker.hosted_partitions() if tp.topic == "t"))
        assert plog is not None
        wait_until(lambda: plog.log.local_log_start_offset > 50, "local copies deleted")
        remote_only = p.FetchRequest([p.FetchTopic("t", [p.FetchPartition(0, 0, 1 << 20)])])

        readiness.ready = False
        held = with_max_wait(remote_only, 400)
        started = time.monotonic()
        (answer,) = c.transport.send(0, held).responses[0].partitions
        assert time.monotonic() - started >= 0.35  # held, not answered at once
        assert error_for_code(answer.error_code).retriable

        timer = threading.Timer(0.2, lambda: setattr(readiness, "ready", True))
        timer.start()
        try:
            (answer,) = (
                c.transport.send(0, with_max_wait(remote_only, 10_000)).responses[0].partitions
            )
        finally:
            timer.cancel()
        assert answer.error_code == p.NONE
        assert offsets(answer.records)[0] == 0


def with_max_wait(request: p.FetchRequest, max_wait_ms: int) -> p.FetchRequest:
    return attrs.evolve(request, max_wait_ms=max_wait_ms)
