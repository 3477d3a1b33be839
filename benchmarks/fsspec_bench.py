"""The fsspec storage plugin against raw fsspec, on file:// and on S3 (s3fs against moto).

* Upload throughput of ``copy_log_segment_data`` vs ``fs.put_file`` of the same segment file,
  transforms off (target >= 0.9 of raw) and on (zstd, AES-256-GCM, both: their cost).
* Latency of a 1 MiB ranged ``fetch_log_segment`` at a random offset vs ``fs.cat_file`` of the
  same byte range, transforms off (target <= 1.2x raw) and on (default 4 MiB chunks, no cache).
* Latency of a 1 MiB read served by the chunk cache (memory, disk) vs reading the same range of
  a local file (target <= 1.1x).

Everything goes through the plugin host and the SPI facade, exactly as the runtime calls it. The
segment is 128 MiB of record-like data (16 MiB with ``quick``); Kafka rolls segments at 1 GiB by
default. Raw and plugin runs alternate so that drift in the machine's speed hits both alike, and
each figure is a best of several runs (uploads) or the median over random ranges of the best of
a few tries (reads): what the code costs, not what a busy machine adds to it. moto serves
a ranged GET by loading the whole object, so S3 read latencies grow with the object's size: the
compressed segment reads faster than the raw one there, which real S3 would not show.
"""

from __future__ import annotations

import base64
import contextlib
import gc
import importlib.util
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
KEY = base64.b64encode(bytes(range(32))).decode()
TRANSFORMS: dict[str, dict[str, str]] = {
    "off": {},
    "zstd": {"compression": "zstd"},
    "aes": {"encryption.keys": f"bench:{KEY}"},
    "zstd+aes": {"compression": "zstd", "encryption.keys": f"bench:{KEY}"},
}


def _records(size: int) -> bytes:
    """Record-like bytes (JSON values with random ids) that compress about as real topics do."""
    out = bytearray()
    offset = 0
    while len(out) < size:
        noise = base64.b64encode(os.urandom(3 * 1024)).decode()
        for start in range(0, len(noise), 32):
            out += (
                f'{{"offset":{offset},"customer":"{noise[start : start + 12]}",'
                f'"order":"{noise[start + 12 : start + 32]}","status":"PLACED","currency":"EUR"}}\n'
            ).encode()
            offset += 1
    return bytes(out[:size])


def _row(
    name: str,
    value: float,
    unit: str,
    baseline: float,
    ratio: float,
    target: str | None,
    ok: bool | None,
) -> dict[str, Any]:
    return {
        "name": name,
        "value": round(value, 4),
        "unit": unit,
        "baseline": round(baseline, 4),
        "ratio": round(ratio, 3),
        "target": target,
        "ok": ok,
    }


# --- where the segments go --------------------------------------------------------------------


_MOTO_SERVER = """
import sys
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
print(f"http://{host}:{port}", flush=True)
sys.stdin.read()
server.stop()
"""


@contextlib.contextmanager
def _moto() -> Iterator[dict[str, str] | None]:
    """moto's S3 server on loopback, in a process of its own (as S3 would be, so it does not
    share this process's CPU and GIL), with fake credentials; None if moto is not installed."""
    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("s3fs") is None:
        yield None
        return
    server = subprocess.Popen(
        [sys.executable, "-c", _MOTO_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    saved = dict(os.environ)
    try:
        assert server.stdout is not None
        endpoint = server.stdout.readline().strip()
        if not endpoint.startswith("http://"):
            raise RuntimeError("moto's server did not start")
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
            os.environ.pop(name, None)
        os.environ.update(
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_DEFAULT_REGION="us-east-1",
            BOTO_CONFIG=os.path.join(tempfile.gettempdir(), "no-such-boto-config"),
        )
        yield {"endpoint_url": endpoint}
    finally:
        os.environ.clear()
        os.environ.update(saved)
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _host(url: str, options: dict[str, str], settings: dict[str, str]) -> Any:
    from tierlog.config import BrokerConfig
    from tierlog.host import PluginHost

    mapping = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.name": "fsspec",
        "remote.log.metadata.manager.name": "memory",
        "rsm.config.url": url,
        **{f"rsm.config.storage.{key}": value for key, value in options.items()},
        **{f"rsm.config.{key}": value for key, value in settings.items()},
    }
    host = PluginHost.create(BrokerConfig.from_mapping(mapping))
    host.start()
    return host


def _segment(directory: Path, payload_path: Path) -> tuple[Any, Any]:
    from tierlog.model import (
        LogSegmentData,
        RemoteLogSegmentId,
        RemoteLogSegmentMetadata,
        TopicIdPartition,
        Uuid,
    )

    for suffix, size in ((".index", 10240), (".timeindex", 15360), (".snapshot", 600)):
        path = directory / f"bench{suffix}"
        if not path.exists():
            path.write_bytes(os.urandom(size))
    partition = TopicIdPartition.of(Uuid(bytes(16)), "bench", 0)
    metadata = RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(partition),
        start_offset=0,
        end_offset=999,
        max_timestamp_ms=0,
        broker_id=0,
        event_timestamp_ms=0,
        segment_size_in_bytes=payload_path.stat().st_size,
        segment_leader_epochs={0: 0},
    )
    data = LogSegmentData(
        log_segment=payload_path,
        offset_index=directory / "bench.index",
        time_index=directory / "bench.timeindex",
        transaction_index=None,
        producer_snapshot_index=directory / "bench.snapshot",
        leader_epoch_index=b"0\n1\n0 0\n",
    )
    return metadata, data


# --- the measurements -------------------------------------------------------------------------


def _elapsed(action: Callable[..., object], *args: Any) -> float:
    started = time.perf_counter()
    action(*args)
    return time.perf_counter() - started


def _best(tries: int, action: Callable[..., object], *args: Any) -> float:
    """The fastest of ``tries`` runs: what the code costs, without the machine's hiccups."""
    return min(_elapsed(action, *args) for _ in range(tries))


def _cat(fs: Any, path: str, start: int, stop: int) -> bytes:
    """The same byte range straight from fsspec (s3fs takes start and end by keyword only)."""
    return fs.cat_file(path, start=start, end=stop)  # type: ignore[no-any-return]


def _fetch(host: Any, metadata: Any, start: int, stop: int) -> bytes:
    """Segment bytes ``[start, stop)`` through the SPI, as the runtime reads them."""
    with host.storage.fetch_log_segment(metadata, start, stop - 1) as stream:
        return stream.read()  # type: ignore[no-any-return]


@contextlib.contextmanager
def _quiet_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _upload_rows(
    label: str,
    url: str,
    options: dict[str, str],
    raw_fs: Any,
    raw_root: str,
    work: Path,
    payload: Path,
    repetitions: int,
    common: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    size_mib = payload.stat().st_size / MiB
    rows = []
    for transform, settings in TRANSFORMS.items():
        host = _host(url, options, {**(common or {}), **settings})
        raw_times, times = [], []
        try:
            for repetition in range(repetitions):
                raw_path = f"{raw_root}/raw-{repetition}.log"
                raw_times.append(_elapsed(raw_fs.put_file, str(payload), raw_path))
                raw_fs.rm_file(raw_path)
                metadata, data = _segment(work, payload)
                times.append(_elapsed(host.storage.copy_log_segment_data, metadata, data))
                host.storage.delete_log_segment_data(metadata)
        finally:
            host.close()
        value = size_mib / min(times)
        baseline = size_mib / min(raw_times)
        ratio = value / baseline
        target, ok = (">= 0.9", ratio >= 0.9) if transform == "off" else (None, None)
        rows.append(
            _row(f"fsspec.{label}.upload.{transform}", value, "MiB/s", baseline, ratio, target, ok)
        )
    return rows


def _ranges(size: int, count: int, seed: int) -> list[tuple[int, int]]:
    """``count`` 1 MiB ranges at random, unaligned offsets."""
    rng = random.Random(seed)
    return [(start, start + MiB) for start in (rng.randrange(0, size - MiB) for _ in range(count))]


def _range_rows(
    label: str,
    url: str,
    options: dict[str, str],
    raw_fs: Any,
    raw_root: str,
    work: Path,
    payload: Path,
    reads: int,
    tries: int,
) -> list[dict[str, Any]]:
    raw_path = f"{raw_root}/raw.log"
    raw_fs.put_file(str(payload), raw_path)
    ranges = _ranges(payload.stat().st_size, reads, seed=42)
    rows = []
    for transform, settings in TRANSFORMS.items():
        host = _host(url, options, settings)
        try:
            metadata, data = _segment(work, payload)
            host.storage.copy_log_segment_data(metadata, data)
            host.storage.fetch_log_segment(metadata, 0, 0).read()  # the manifest, once
            raw_times, times = [], []
            with _quiet_gc():
                for start, stop in ranges:
                    raw_times.append(_best(tries, _cat, raw_fs, raw_path, start, stop))
                    times.append(_best(tries, _fetch, host, metadata, start, stop))
            host.storage.delete_log_segment_data(metadata)
        finally:
            host.close()
        value, baseline = statistics.median(times) * 1000, statistics.median(raw_times) * 1000
        ratio = value / baseline
        target, ok = ("<= 1.2", ratio <= 1.2) if transform == "off" else (None, None)
        rows.append(
            _row(f"fsspec.{label}.read1MiB.{transform}", value, "ms", baseline, ratio, target, ok)
        )
    raw_fs.rm_file(raw_path)
    return rows


def _cache_rows(work: Path, payload: Path, reads: int) -> list[dict[str, Any]]:
    ranges = _ranges(payload.stat().st_size, reads, seed=7)

    def local_read(start: int, stop: int) -> bytes:
        with open(payload, "rb", buffering=0) as handle:
            handle.seek(start)
            return handle.read(stop - start)

    rows = []
    for kind in ("memory", "disk"):
        settings = {"cache.kind": kind, "cache.size.bytes": str(2 * payload.stat().st_size)}
        if kind == "disk":
            settings["cache.dir"] = str(work / "cache")
        host = _host(f"file://{work}/cached", {}, settings)
        try:
            metadata, data = _segment(work, payload)
            host.storage.copy_log_segment_data(metadata, data)
            host.storage.fetch_log_segment(metadata, 0).read()  # every chunk is now cached
            raw_times, times = [], []
            with _quiet_gc():
                for start, stop in ranges:
                    raw_times.append(_best(5, local_read, start, stop))
                    times.append(_best(5, _fetch, host, metadata, start, stop))
        finally:
            host.close()
        value, baseline = statistics.median(times) * 1000, statistics.median(raw_times) * 1000
        ratio = value / baseline
        rows.append(
            _row(f"fsspec.cache_hit.{kind}", value, "ms", baseline, ratio, "<= 1.1", ratio <= 1.1)
        )
    return rows


def run(quick: bool) -> list[dict[str, Any]]:
    import fsspec.core

    segment_size = (16 if quick else 128) * MiB
    repetitions = 3 if quick else 7
    reads = 15 if quick else 60
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tierlog-fsspec-bench-") as directory:
        work = Path(directory)
        payload = work / "00000000000000000000.log"
        payload.write_bytes(_records(segment_size))

        raw_root = str(work / "raw")
        os.makedirs(raw_root)
        local = fsspec.core.url_to_fs("file://" + raw_root)[0]
        url = f"file://{work}/tiered"
        rows += _upload_rows("file", url, {}, local, raw_root, work, payload, repetitions)
        rows += _range_rows("file", url, {}, local, raw_root, work, payload, reads, tries=3)
        rows += _cache_rows(work, payload, reads)

        with _moto() as options:
            if options is not None:
                s3, _ = fsspec.core.url_to_fs("s3://bench", skip_instance_cache=True, **options)
                s3.mkdir("bench")
                url = "s3://bench/tiered"
                # Parts as large as s3fs's own put_file makes them, so both sides send the same
                # requests and the figure measures the plugin, not the part size.
                same_parts = {"upload.part.size": str(50 * MiB)}
                rows += _upload_rows(
                    "s3",
                    url,
                    options,
                    s3,
                    "bench/raw",
                    work,
                    payload,
                    max(3, repetitions - 2),
                    same_parts,
                )
                rows += _range_rows(
                    "s3", url, options, s3, "bench/raw", work, payload, max(5, reads // 4), tries=3
                )
    return rows


if __name__ == "__main__":
    for result in run(quick=True):
        print(result)
