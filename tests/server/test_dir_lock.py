"""One process per data directory: the ``.lock`` file in each log dir and the controller's dir.

A second cluster, a second broker or a second ``tierlog run`` on directories in use fails with
an error naming the directory and the holder; the first keeps serving, its data intact. A
holder killed with SIGKILL leaves nothing behind that blocks the next start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import LogDirLockedError
from tierlog.log import LOCK_FILE_NAME, DirectoryLock
from tierlog.server.broker import Broker, BrokerState

from .conftest import Client, batch, values


def run_process(config: Path, data_dir: Path) -> subprocess.Popen[str]:
    """``tierlog run`` as its own process (the same command a user types)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tierlog",
            "run",
            "--config",
            str(config),
            "--data-dir",
            str(data_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_serving(process: subprocess.Popen[str]) -> str:
    """Reads the process's stderr up to the line saying it serves; fails if it ends first."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "serving" in line:
            return line
    raise AssertionError(f"the process ended without serving: {''.join(seen)}")


def produce_kept(cluster: EmbeddedCluster) -> Client:
    client = Client(cluster)
    client.create("kept")
    assert client.produce("kept", 0, batch(3, tag="kept")).error_code == 0
    return client


def kept(client: Client) -> list[bytes]:
    return values(client.fetch("kept").records)


EXPECTED = [b"kept-0", b"kept-1", b"kept-2"]


def test_every_directory_of_a_running_cluster_is_locked_until_it_stops(tmp_path: Path) -> None:
    data = tmp_path / "data"
    directories = [data / "controller", *(data / f"broker-{n}" / "logs" for n in range(3))]
    with EmbeddedCluster(3, data):
        for directory in directories:
            assert (directory / LOCK_FILE_NAME).is_file()
            with pytest.raises(LogDirLockedError, match=f"pid {os.getpid()} on host "):
                DirectoryLock.acquire(directory)
    for directory in directories:
        DirectoryLock.acquire(directory).release()
        assert (directory / LOCK_FILE_NAME).read_bytes() == b"", "a stopped holder leaves no name"


def test_a_second_cluster_in_the_same_process_fails_and_the_first_keeps_serving(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with EmbeddedCluster(1, data) as first:
        client = produce_kept(first)

        second = EmbeddedCluster(1, data)
        with pytest.raises(LogDirLockedError) as caught:
            second.start()

        message = str(caught.value)
        assert str(data / "controller") in message
        assert f"held by pid {os.getpid()} on host {socket.gethostname()}" in message
        assert first.broker(0).serving
        assert client.produce("kept", 0, batch(1, tag="after")).error_code == 0
        assert kept(client) == [*EXPECTED, b"after-0"]


def test_a_second_broker_on_a_log_dir_in_use_in_the_same_process_fails(tmp_path: Path) -> None:
    with EmbeddedCluster(1, tmp_path / "data") as cluster:
        client = produce_kept(cluster)
        log_dir = cluster.broker_config(0).get_list("log.dirs")[0]

        intruder = Broker(cluster.broker_config(0), cluster.controller)
        with pytest.raises(LogDirLockedError, match=f"directory {log_dir} is in use") as caught:
            intruder.start()

        assert f"pid {os.getpid()}" in str(caught.value)
        assert intruder.state is BrokerState.STOPPED
        assert cluster.broker(0).serving
        assert kept(client) == EXPECTED
        assert client.produce("kept", 0, batch(1, tag="after")).error_code == 0


def test_a_restarted_broker_takes_its_directory_back(tmp_path: Path) -> None:
    with EmbeddedCluster(2, tmp_path / "data") as cluster:
        client = produce_kept(cluster)
        leader = client.leader("kept")
        log_dir = cluster.broker_config(leader).get_list("log.dirs")[0]
        for clean in (True, False):
            cluster.restart_broker(leader, clean=clean)
            with pytest.raises(LogDirLockedError, match="this process"):
                DirectoryLock.acquire(log_dir)
        assert kept(client) == EXPECTED


def test_a_second_process_fails_naming_the_directory_and_this_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text("num.partitions=1\nlisteners=PLAINTEXT://127.0.0.1:0\n")
    with EmbeddedCluster(1, data) as first:
        client = produce_kept(first)

        second = run_process(config, data)
        try:
            _out, err = second.communicate(timeout=120)
        finally:
            if second.poll() is None:  # it started beside the first: stop it
                second.kill()
                second.communicate()

        assert second.returncode == 2, err
        assert "Traceback" not in err
        assert err.startswith(f"error: directory {data / 'controller'} is in use"), err
        assert f"held by pid {os.getpid()} on host {socket.gethostname()}" in err
        assert first.broker(0).serving
        assert kept(client) == EXPECTED
        assert client.produce("kept", 0, batch(1, tag="after")).error_code == 0
    with EmbeddedCluster(1, data) as again:
        assert kept(Client(again)) == [*EXPECTED, b"after-0"]


def test_a_process_killed_with_sigkill_leaves_the_directory_free(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedCluster(1, data) as cluster:
        produce_kept(cluster)
    config = tmp_path / "server.properties"
    config.write_text("num.partitions=1\nlisteners=PLAINTEXT://127.0.0.1:0\n")
    holder = run_process(config, data)
    try:
        wait_until_serving(holder)
        with pytest.raises(LogDirLockedError, match=f"held by pid {holder.pid} on host "):
            EmbeddedCluster(1, data).start()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=120)
    assert holder.returncode == -signal.SIGKILL

    with EmbeddedCluster(1, data) as restarted:
        assert kept(Client(restarted)) == EXPECTED


def test_a_lock_file_naming_a_dead_process_does_not_block(tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    (directory / LOCK_FILE_NAME).write_text("pid=999999999\nhost=elsewhere\n")

    lock = DirectoryLock.acquire(directory)

    assert (directory / LOCK_FILE_NAME).read_text() == (
        f"pid={os.getpid()}\nhost={socket.gethostname()}\n"
    )
    lock.release()
    lock.release()  # idempotent
    assert not lock.held
