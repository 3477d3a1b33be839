"""The remote log manager: tiering throughput, consuming from the remote tier, memory.

* Tiering throughput to ``file://`` through the fsspec plugin (no transforms), in steady state:
  switch ``remote.storage.enable`` on for a topic whose segments are all rolled, and time from
  the first segment tiered to the last (noted by a metadata wrapper plugin as each copy
  finishes, so nothing polls beside the copy); against copying the same segment files and
  indexes with ``shutil.copyfile`` (target >= 0.9 of raw). Both sides copy the same volume:
  the segments after the first, whose copy opens the timed window. Page cache state is the same
  for both: every source file is read once beforehand; each side starts after ``os.sync()``
  with no dirty pages, writes new files on the same filesystem and ends with ``os.sync()`` so
  the other never pays for its writeback; a raw copy is deleted once timed, so it never adds to
  the data live while the next side writes. Each round, on a fresh cluster, times tiering
  between two raw copies (A-B-A, against drift) and compares it with their mean; the row gives
  the medians over 9 rounds (3 with ``quick``), its ratio is the median of the per-round
  ratios, and the name shows their range. The delay before the first copy (the config change
  and the task interval) is reported on its own row: it is latency, not throughput.
* Consuming a topic from the earliest offset when its rolled segments exist only in the remote
  tier, against the same consume when all its data is local (the ratio is reported).
* Peak RSS of a broker process tiering a 2 GiB log (256 MiB with ``quick``), measured in a child
  process that only starts the broker and tiers (target < 200 MiB).

Everything goes through the embedded cluster and its public requests, as a deployment would.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from tierlog import hookimpl

from benchmarks.report import row

MiB = 1024 * 1024
TOPIC = "bench"


def _settings(remote: Path) -> dict[str, object]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": remote.resolve().as_uri(),
        "remote.log.manager.task.interval.ms": "20",
        "log.retention.check.interval.ms": "50",
    }


def _big_batch(size: int) -> bytes:
    from tierlog.records import Compression, RecordBatchBuilder

    builder = RecordBatchBuilder(Compression.NONE)
    value = os.urandom(16 * 1024)
    now = int(time.time() * 1000)
    for i in range(max(1, size // len(value))):
        builder.append(now, f"k{i}".encode(), value)
    return builder.build()


def _produce_bytes(cluster: Any, total: int, batch_size: int = 900 * 1024) -> None:
    from tierlog.server import protocol as p

    batch = _big_batch(batch_size)
    for _ in range(max(1, total // len(batch))):
        request = p.ProduceRequest(
            acks=-1,
            timeout_ms=30_000,
            topic_data=[p.TopicProduceData(TOPIC, [p.PartitionProduceData(0, batch)])],
        )
        response = cluster.transport.send(0, request)
        code = response.responses[0].partition_responses[0].error_code
        if code != p.NONE:
            raise RuntimeError(f"produce failed with error {code}")


def _create(cluster: Any, **configs: str) -> None:
    from tierlog.client import Admin, NewTopic

    with Admin(cluster.transport) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 1, configs=configs)])
    from tierlog.model import TopicPartition

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        replica = cluster.broker(0).partition(TopicPartition(TOPIC, 0))
        if replica is not None and replica.is_leader:
            return
        time.sleep(0.01)


def _enable_and_wait(cluster: Any) -> tuple[float, float]:
    """Switches tiering on and waits until every rolled segment is tiered.

    Returns (seconds from the switch until the first segment was tiered, seconds from then until
    the last one was): the first covers the config change and the task interval, the second is
    the copy path's steady-state throughput.
    """
    from tierlog.client import Admin, AlterConfig, ConfigResource
    from tierlog.model import TopicPartition

    plog = cluster.broker(0).partition(TopicPartition(TOPIC, 0)).log
    segments = plog.segments()
    first_end = segments[1].base_offset - 1
    last_rolled = segments[-1].base_offset - 1
    started = time.perf_counter()
    with Admin(cluster.transport) as admin:
        admin.alter_configs(
            {ConfigResource.topic(TOPIC): [AlterConfig("remote.storage.enable", "true")]}
        )
    while plog.highest_offset_in_remote_storage < first_end:
        time.sleep(0.001)
    first = time.perf_counter()
    while plog.highest_offset_in_remote_storage < last_rolled:
        time.sleep(0.001)
    return first - started, time.perf_counter() - first


def _segment_files(plog: Any) -> list[list[Path]]:
    """The files tiering copies for each rolled segment (log and indexes), segment by segment."""
    groups = []
    for segment in plog.segments()[:-1]:
        stem = segment.log_path.with_suffix("")
        suffixes = (".log", ".index", ".timeindex")
        groups.append([p for p in (stem.with_suffix(s) for s in suffixes) if p.exists()])
    return groups


class _CopyClock:
    """A metadata wrapper plugin noting when each segment reaches COPY_SEGMENT_FINISHED.

    The times are taken on the copier thread as the copy ends, so nothing polls for them while
    the copy runs (a polling loop would take CPU from the tiering side only).
    """

    def __init__(self) -> None:
        self.finished: list[float] = []
        self.expected = 0
        self.done = threading.Event()

    @hookimpl(wrapper=True)
    def tierlog_update_remote_log_segment_metadata(
        self, remote_log_segment_metadata_update: Any
    ) -> Generator[None, Any, Any]:
        from tierlog.model import RemoteLogSegmentState

        result = yield
        if remote_log_segment_metadata_update.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            self.finished.append(time.perf_counter())
            if len(self.finished) >= self.expected:
                self.done.set()
        return result


def _read_through(files: list[Path]) -> None:
    """Reads every file once, so both sides start with the sources in the page cache."""
    for f in files:
        with open(f, "rb", buffering=0) as source:
            while source.read(8 * MiB):
                pass


def _raw_copy(files: list[Path], target: Path) -> float:
    os.sync()  # no dirty pages left from the other side or the producer
    target.mkdir()
    started = time.perf_counter()
    for f in files:
        shutil.copyfile(f, target / f.name)  # no fsync: fsspec's put_file does none
    elapsed = time.perf_counter() - started
    os.sync()
    shutil.rmtree(target)  # the next side writes with as much page cache in use as this one
    return elapsed


def _tier(cluster: Any, clock: _CopyClock) -> tuple[float, float]:
    """Switches tiering on; returns (seconds until the first segment was tiered, seconds from
    then until the last one was)."""
    from tierlog.client import Admin, AlterConfig, ConfigResource

    os.sync()
    switched = time.perf_counter()
    with Admin(cluster.transport) as admin:
        admin.alter_configs(
            {ConfigResource.topic(TOPIC): [AlterConfig("remote.storage.enable", "true")]}
        )
    if not clock.done.wait(600):
        raise RuntimeError("tiering did not finish within 10 minutes")
    os.sync()
    return clock.finished[0] - switched, clock.finished[-1] - clock.finished[0]


def _tier_once(work: Path, total: int, segment_bytes: int) -> tuple[int, float, float, float]:
    """One round on a fresh cluster: a raw copy, tiering, a raw copy, of the same segments.

    Returns (bytes of the segments after the first, seconds to tier them, seconds to copy the
    same files raw (the mean of the copy before and the one after), seconds from switching
    tiering on until the first segment was tiered).
    """
    from tierlog.cluster import EmbeddedCluster
    from tierlog.model import TopicPartition

    clock = _CopyClock()
    settings = _settings(work / "remote")
    with EmbeddedCluster(1, work / "data", settings, extra_plugins={"clock": clock}) as cluster:
        _create(cluster, **{"segment.bytes": str(segment_bytes)})
        _produce_bytes(cluster, total)
        plog = cluster.broker(0).partition(TopicPartition(TOPIC, 0)).log
        groups = _segment_files(plog)
        clock.expected = len(groups)
        files = [f for group in groups[1:] for f in group]
        size = sum(f.stat().st_size for f in files)
        _read_through([f for group in groups for f in group])
        before = _raw_copy(files, work / "raw")
        startup, tiered = _tier(cluster, clock)
        after = _raw_copy(files, work / "raw")
    return size, tiered, (before + after) / 2, startup


def tiering_throughput(
    work: Path, total: int, segment_bytes: int, rounds: int
) -> list[dict[str, Any]]:
    """Medians over ``rounds``; the ratio is the median of each round's own ratio.

    A round times tiering between two raw copies of the same files, all within a second or
    two, so the load other processes put on the machine and the drift of the page cache mostly
    cancel out of its ratio.
    """
    results = []
    for n in range(rounds):
        (work / str(n)).mkdir()
        results.append(_tier_once(work / str(n), total, segment_bytes))
        shutil.rmtree(work / str(n))
    tiered = statistics.median(size / seconds / MiB for size, seconds, _, _ in results)
    raw = statistics.median(size / seconds / MiB for size, _, seconds, _ in results)
    ratios = sorted(raw_s / tier_s for _, tier_s, raw_s, _ in results)
    copied = row(
        f"tiering to file:// vs raw file copy (steady state; median of {rounds}, "
        f"ratios {ratios[0]:.2f}..{ratios[-1]:.2f})",
        tiered,
        "MiB/s",
        raw,
        0.9,
    )
    copied["ratio"] = round(statistics.median(ratios), 3)
    copied["ok"] = copied["ratio"] >= 0.9
    return [
        copied,
        {
            "name": "time from enabling tiering to the first segment tiered",
            "value": round(statistics.median(r[3] for r in results) * 1000, 1),
            "unit": "ms",
            "baseline": None,
            "ratio": None,
            "target": None,
            "ok": None,
        },
    ]


def consume_ratio(work: Path, records: int) -> list[dict[str, Any]]:
    from tierlog.client import Admin, Consumer, NewTopic, Producer
    from tierlog.cluster import EmbeddedCluster
    from tierlog.model import TopicPartition

    with EmbeddedCluster(1, work / "data", _settings(work / "remote")) as cluster:
        with Admin(cluster.transport) as admin:
            admin.create_topics(
                [
                    NewTopic(
                        "remote",
                        1,
                        1,
                        configs={
                            "segment.bytes": str(MiB),
                            "remote.storage.enable": "true",
                            "local.retention.bytes": "1",
                        },
                    ),
                    NewTopic("local", 1, 1, configs={"segment.bytes": str(MiB)}),
                ]
            )
        value = os.urandom(100).hex().encode()
        with Producer(cluster.transport, {"linger.ms": 5}) as producer:
            for n in range(records):
                producer.send("remote", value, key=str(n).encode())
                producer.send("local", value, key=str(n).encode())
        plog = cluster.broker(0).partition(TopicPartition("remote", 0)).log
        while plog.segment_count > 1:
            time.sleep(0.02)

        def consume(topic: str) -> float:
            consumer = Consumer(cluster.transport, {"auto.offset.reset": "earliest"})
            consumer.assign([TopicPartition(topic, 0)])
            got, started = 0, time.perf_counter()
            while got < records:
                got += len(consumer.poll(timeout_ms=500))
            elapsed = time.perf_counter() - started
            consumer.close()
            return elapsed

        local = min(consume("local") for _ in range(2))
        remote = min(consume("remote") for _ in range(2))
    return [
        row(
            "consume from earliest: remote tier vs all local",
            records / remote,
            "rec/s",
            records / local,
            None,
        )
    ]


def _peak_rss_kib() -> int:
    """This process's peak RSS. ``VmHWM`` starts afresh at exec; ``ru_maxrss`` would carry over
    the peak of the parent that forked it (the benchmark runner, after the earlier rows)."""
    try:
        status = Path("/proc/self/status").read_text()
        return int(next(x for x in status.splitlines() if x.startswith("VmHWM")).split()[1])
    except (OSError, StopIteration):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak // 1024 if sys.platform == "darwin" else peak


def _rss_child(work: str, total: int, segment_bytes: int) -> None:
    """In a fresh process: build the log with tiering off, restart, tier it, report peak RSS."""
    from tierlog.cluster import EmbeddedCluster

    root = Path(work)
    with EmbeddedCluster(1, root / "data", _settings(root / "remote")) as cluster:
        _create(cluster, **{"segment.bytes": str(segment_bytes)})
        _produce_bytes(cluster, total)
    before = _peak_rss_kib()
    print(json.dumps({"phase": "built", "rss_kib": before}), flush=True)


def _rss_tier_child(work: str) -> None:
    from tierlog.cluster import EmbeddedCluster

    root = Path(work)
    with EmbeddedCluster(1, root / "data", _settings(root / "remote")) as cluster:
        seconds = _enable_and_wait(cluster)
    peak = _peak_rss_kib()
    print(json.dumps({"rss_kib": peak, "seconds": seconds}), flush=True)


def peak_rss(work: Path, total: int, segment_bytes: int) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERLOG_")}
    cwd = Path(__file__).resolve().parent.parent
    build = (
        f"from benchmarks.remote_bench import _rss_child; "
        f"_rss_child({str(work)!r}, {total}, {segment_bytes})"
    )
    subprocess.run([sys.executable, "-c", build], check=True, cwd=cwd, env=env, capture_output=True)
    tier = f"from benchmarks.remote_bench import _rss_tier_child; _rss_tier_child({str(work)!r})"
    out = subprocess.run(
        [sys.executable, "-c", tier], check=True, cwd=cwd, env=env, capture_output=True, text=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    rss_mib = result["rss_kib"] / 1024
    return [
        row(
            f"peak RSS tiering a {total // MiB} MiB log",
            rss_mib,
            "MiB",
            None,
            200.0,
            higher_is_better=False,
        )
    ]


def run(quick: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tierlog-remote-bench-") as scratch:
        root = Path(scratch)
        (root / "a").mkdir()
        rows += tiering_throughput(
            root / "a",
            (128 if quick else 512) * MiB,
            (16 if quick else 64) * MiB,
            3 if quick else 9,
        )
        (root / "b").mkdir()
        rows += consume_ratio(root / "b", 5_000 if quick else 50_000)
        (root / "c").mkdir()
        rows += peak_rss(root / "c", (256 if quick else 2048) * MiB, 64 * MiB)
    return rows


if __name__ == "__main__":
    for figure in run("--quick" in sys.argv):
        print(figure)
