"""Embed tierlog in an application: configure it from a TOML file, change a setting while it
runs, and export its metrics for Prometheus.

Run ``python examples/integrator/run.py [WORKDIR]`` with tierlog and tierlog-fsspec installed;
the broker keeps its logs under ``WORKDIR/logs`` and its remote segments under
``WORKDIR/remote`` (a temporary directory when none is given). Prometheus text goes to stdout.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from tierlog.client import Admin, AlterConfig, ConfigResource, NewTopic, Producer
from tierlog.cluster import EmbeddedCluster
from tierlog.config import load_sources
from tierlog.metrics import prometheus_text
from tierlog.model import TopicPartition

CONFIG_FILE = Path(__file__).with_name("broker.toml")
DYNAMIC_KEY = "remote.fetch.max.wait.ms"


def run(workdir: Path) -> str:
    """Starts the broker, tiers a few segments, and returns its metrics in Prometheus format."""
    overrides = {
        "log.dirs": [str(workdir / "logs")],
        "rsm.config.url": (workdir / "remote").resolve().as_uri(),
    }
    # The same layering as `tierlog run --config`: file < TIERLOG_* environment < overrides.
    settings = load_sources(CONFIG_FILE, os.environ, overrides)
    with EmbeddedCluster(1, workdir, settings) as cluster:
        broker = cluster.broker(0)
        print(f"# {DYNAMIC_KEY} at start: {broker.config[DYNAMIC_KEY]}", file=sys.stderr)
        with Admin(cluster.transport) as admin:
            # A dynamic broker config: applied to the running broker, no restart.
            admin.alter_configs({ConfigResource.broker(0): [AlterConfig(DYNAMIC_KEY, "1000")]})
            configs = {"remote.storage.enable": "true", "segment.bytes": "4096"}
            admin.create_topics([NewTopic("events", 1, 1, configs=configs)])
        print(f"# {DYNAMIC_KEY} now: {broker.config[DYNAMIC_KEY]}", file=sys.stderr)

        with Producer(cluster.transport, {"batch.size": 1024, "linger.ms": 0}) as producer:
            for n in range(200):
                producer.send("events", b"x" * 100, key=str(n).encode(), partition=0)
        partition = broker.partition(TopicPartition("events", 0))
        assert partition is not None
        deadline = time.monotonic() + 30
        while partition.log.highest_offset_in_remote_storage < 0:
            if time.monotonic() > deadline:
                raise SystemExit("no segment reached remote storage within 30s")
            time.sleep(0.05)

        assert broker.plugin_host is not None
        return prometheus_text(broker.plugin_host.metrics)


def main() -> None:
    if len(sys.argv) > 1:
        print(run(Path(sys.argv[1])), end="")
        return
    with tempfile.TemporaryDirectory(prefix="tierlog-integrator-") as workdir:
        print(run(Path(workdir)), end="")


if __name__ == "__main__":
    main()
