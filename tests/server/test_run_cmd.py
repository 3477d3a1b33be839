"""``tierlog run`` as a real process, stopped by a real signal."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.log import files

from .conftest import Client, batch, values

RUN = "from tierlog.cli.run_cmd import run_command; run_command()"


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RUN, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_serving(process: subprocess.Popen[str]) -> list[str]:
    """Reads the process's stderr up to the line saying it serves (or to its end)."""
    assert process.stderr is not None
    lines = []
    for line in process.stderr:
        lines.append(line)
        if "serving" in line:
            break
    return lines


@pytest.mark.parametrize(
    ("file_name", "text", "sig"),
    [
        ("server.toml", 'cluster.id = "run-test"\nnum.partitions = 2\n', signal.SIGTERM),
        ("server.properties", "cluster.id=run-test\nnum.partitions=2\n", signal.SIGINT),
    ],
)
def test_run_serves_until_signalled_then_shuts_down_cleanly(
    tmp_path: Path, file_name: str, text: str, sig: signal.Signals
) -> None:
    data_dir = tmp_path / "data"
    with EmbeddedCluster(2, data_dir, {"cluster.id": "run-test"}) as cluster:
        client = Client(cluster)
        client.create("kept", partitions=2)
        client.produce("kept", 1, batch(2, tag="kept"))
    config = tmp_path / file_name
    config.write_text(text)

    process = start("--config", str(config), "--brokers", "2", "--data-dir", str(data_dir))
    started = wait_until_serving(process)
    process.send_signal(sig)
    _out, rest = process.communicate(timeout=120)

    assert any("2 broker(s) serving, cluster id run-test" in line for line in started), started
    assert process.returncode == 0, rest
    assert "stopped" in rest
    markers = sorted(
        p.parent.name for p in data_dir.glob(f"broker-*/logs/*/{files.CLEAN_SHUTDOWN_MARKER}")
    )
    assert markers == ["kept-0", "kept-1"]
    with EmbeddedCluster(2, data_dir) as cluster:
        assert values(Client(cluster).fetch("kept", 1).records) == [b"kept-0", b"kept-1"]


def test_run_refuses_a_bad_config_file(tmp_path: Path) -> None:
    config = tmp_path / "server.toml"
    config.write_text("num.partitions = 0\n")

    process = start("--config", str(config), "--data-dir", str(tmp_path / "data"))
    _out, err = process.communicate(timeout=120)

    assert process.returncode == 2
    assert "num.partitions" in err
    assert not (tmp_path / "data").exists()
