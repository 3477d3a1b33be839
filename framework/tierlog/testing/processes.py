"""Brokers as real processes, for tests and benchmarks of multi-process clusters.

A :class:`ProcessCluster` runs ``tierlog run --broker-id N`` once per broker, each in its own
Python process with its own log dir, listener and Prometheus endpoint, against a ZooKeeper
connect string (a :class:`~tierlog.coordination.zookeeper_server.ZooKeeperEnsemble` in tests).
It can do to a broker what an operator or a failure does to one: SIGTERM (controlled shutdown),
SIGKILL (a crash), SIGSTOP/SIGCONT (a pause), and restart it on the same port and log dir. It
reads what the cluster says of itself from ZooKeeper (controller, leaders, ISRs) and from each
process's ``/metrics``, never from inside a broker: the processes are black boxes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Final, Self, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from prometheus_client.parser import text_string_to_metric_families

from ..coordination import paths
from ..coordination.zookeeper_server import find_free_port

__all__ = [
    "BrokerProcess",
    "BrokerProcessError",
    "ProcessCluster",
    "tiered_settings",
    "wait_until",
]

_T = TypeVar("_T")

_BOOTSTRAP: Final = re.compile(r"^tierlog: bootstrap servers (\S+)$", re.M)
_METRICS: Final = re.compile(r"^tierlog: metrics at (\S+)$", re.M)
_SERVING: Final = re.compile(r"^tierlog: broker \d+ serving", re.M)
_LOG_TAIL_LINES: Final = 40


class BrokerProcessError(RuntimeError):
    """A broker process did not start, or died, or did not stop; the message ends with its log."""


def wait_until(probe: Callable[[], _T], timeout_s: float, what: str, interval_s: float = 0.1) -> _T:
    """``probe()``'s first truthy answer; TimeoutError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: _T = probe()
    while not last:
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.1f}s waiting for {what}")
        time.sleep(interval_s)
        last = probe()
    return last


class BrokerProcess:
    """One broker's process: its configuration file, log dir, port, output and signals."""

    def __init__(self, broker_id: int, directory: Path, settings: Mapping[str, str]) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.port = find_free_port()
        self.log_dir = directory / "logs"
        self.config_path = directory / "server.properties"
        self.output_path = directory / "broker.out"
        self.process: subprocess.Popen[bytes] | None = None
        self.metrics_url: str | None = None
        self._output_offset = 0
        self.starts = 0
        directory.mkdir(parents=True, exist_ok=True)
        self.settings: dict[str, str] = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "metrics.prometheus.port": "0",
            **settings,
        }
        self._write_config()

    def configure(self, settings: Mapping[str, object]) -> None:
        """Sets keys of this broker's ``server.properties`` alone (e.g. its own
        ``advertised.listeners``); the process reads them at its next start."""
        self.settings.update({key: _property(value) for key, value in settings.items()})
        self._write_config()

    def _write_config(self) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        if self.process is None:
            raise BrokerProcessError(f"broker {self.broker_id} was never started")
        return self.process.pid

    def output(self) -> str:
        """Everything this broker printed since its latest start."""
        try:
            with self.output_path.open("rb") as f:
                f.seek(self._output_offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def output_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return "\n".join(self.output().splitlines()[-lines:]) or "(no output)"

    def start(self) -> None:
        """Launches the process; :meth:`wait_serving` waits for it to serve."""
        if self.running:
            raise BrokerProcessError(f"broker {self.broker_id} is already running")
        self._output_offset = self.output_path.stat().st_size if self.output_path.exists() else 0
        self.metrics_url = None
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.output_path.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tierlog",
                    "-v",
                    "run",
                    "--config",
                    str(self.config_path),
                    "--broker-id",
                    str(self.broker_id),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        self.starts += 1

    def wait_serving(self, timeout_s: float = 60.0) -> None:
        """Returns once the broker says it serves (registered, counted live by the controller)."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.output()
            if _SERVING.search(text):
                found = _METRICS.search(text)
                self.metrics_url = found.group(1) if found else None
                return
            if not self.running:
                raise BrokerProcessError(
                    f"broker {self.broker_id} exited with {self._returncode()} before serving; "
                    f"its output:\n{self.output_tail()}"
                )
            if time.monotonic() > deadline:
                raise BrokerProcessError(
                    f"broker {self.broker_id} did not serve within {timeout_s:.0f}s; "
                    f"its output:\n{self.output_tail()}"
                )
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL, as a crash or a power cut: nothing is flushed, nothing handed over."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, a controlled shutdown; returns the exit status (killed after ``timeout_s``)."""
        self.send_terminate()
        return self.wait_stopped(timeout_s)

    def send_terminate(self) -> None:
        """SIGTERM without waiting (a second one would cut the controlled shutdown short)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()

    def wait_stopped(self, timeout_s: float = 60.0) -> int:
        """The exit status once the process ends; killed (and an error) after ``timeout_s``."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise BrokerProcessError(
                    f"broker {self.broker_id} did not stop within {timeout_s:.0f}s of SIGTERM; "
                    f"its output:\n{self.output_tail()}"
                ) from None
        return self._returncode()

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and its ZooKeeper session but answers nothing."""
        if self.process is not None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    def metrics(self, timeout_s: float = 5.0) -> dict[str, list[tuple[dict[str, str], float]]]:
        """This broker's ``/metrics``: per sample name, its (labels, value) pairs."""
        if self.metrics_url is None:
            raise BrokerProcessError(f"broker {self.broker_id} serves no metrics (not serving?)")
        with urllib.request.urlopen(self.metrics_url, timeout=timeout_s) as answer:
            text = answer.read().decode()
        found: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
        return found

    def metric(self, group: str, name: str, **labels: str) -> float:
        """The sum of a Kafka-named metric's series whose labels include ``labels``;
        e.g. ``metric("ReplicaManager", "UnderReplicatedPartitions")``."""
        key = f"tierlog_{group}_{name}".lower()
        series = self.metrics().get(key)
        if series is None:
            raise KeyError(f"broker {self.broker_id} has no metric {group} {name} ({key})")
        return sum(
            value for have, value in series if all(have.get(k) == v for k, v in labels.items())
        )

    def _returncode(self) -> int:
        assert self.process is not None
        code = self.process.poll()
        return -1 if code is None else code

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"BrokerProcess({self.broker_id}, {self.bootstrap}, {state})"


class ProcessCluster:
    """N brokers, one process each, coordinated through ZooKeeper under a chroot of their own.

    ``settings`` are written into every broker's ``server.properties`` (after the cluster's own
    keys, so they may override them). Use it as a context manager: leaving it kills whatever
    still runs, so no broker outlives a failed test.
    """

    def __init__(
        self,
        directory: Path,
        zookeeper_connect: str,
        size: int = 3,
        *,
        settings: Mapping[str, object] | None = None,
        chroot: str = "/tierlog",
        session_timeout_ms: int = 6000,
    ) -> None:
        self.directory = directory
        self.zookeeper_connect = zookeeper_connect
        self.chroot = chroot
        self.session_timeout_ms = session_timeout_ms
        common = {
            "zookeeper.connect": zookeeper_connect + chroot,
            "zookeeper.session.timeout.ms": str(session_timeout_ms),
            **{key: _property(value) for key, value in (settings or {}).items()},
        }
        self.brokers = {
            broker_id: BrokerProcess(
                broker_id,
                directory / f"broker-{broker_id}",
                {**common, "broker.id": str(broker_id)},
            )
            for broker_id in range(size)
        }
        self._zk: KazooClient | None = None

    # --- life cycle -----------------------------------------------------------------------

    def start(self, timeout_s: float = 90.0) -> None:
        """Starts every broker and returns once all serve."""
        for broker in self.brokers.values():
            broker.start()
        for broker in self.brokers.values():
            broker.wait_serving(timeout_s)

    def restart(self, broker_id: int, timeout_s: float = 90.0) -> None:
        broker = self.brokers[broker_id]
        broker.start()
        broker.wait_serving(timeout_s)

    def stop(self, timeout_s: float = 60.0) -> dict[int, int]:
        """SIGTERM to every broker at once; their exit statuses. Anything left is killed."""
        for broker in self.brokers.values():
            broker.send_terminate()
        codes: dict[int, int] = {}
        errors: list[BrokerProcessError] = []
        for broker_id, broker in self.brokers.items():
            try:
                codes[broker_id] = broker.wait_stopped(timeout_s)
            except BrokerProcessError as err:
                errors.append(err)
        self._close_zk()
        if errors:
            raise errors[0]
        return codes

    def kill_all(self) -> None:
        for broker in self.brokers.values():
            broker.kill()
        self._close_zk()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.kill_all()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.kill_all()

    # --- what the cluster says of itself ---------------------------------------------------

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def bootstrap_servers(self, *, exclude: tuple[int, ...] = ()) -> str:
        return ",".join(b.bootstrap for i, b in self.brokers.items() if i not in exclude)

    @property
    def zk(self) -> KazooClient:
        """A kazoo session of the harness's own, inside the cluster's chroot."""
        if self._zk is None:
            client = KazooClient(hosts=self.zookeeper_connect + self.chroot)
            client.start(timeout=15)
            self._zk = client
        return self._zk

    def _read_json(self, path: str) -> dict[str, object] | None:
        try:
            data, _stat = self.zk.get(path)
        except NoNodeError:
            return None
        loaded = json.loads(data)
        return loaded if isinstance(loaded, dict) else None

    def controller_id(self) -> int | None:
        """The broker holding ``/controller``, or None while nobody does."""
        found = self._read_json(paths.CONTROLLER)
        return None if found is None else int(str(found["brokerid"]))

    def registered(self) -> set[int]:
        """The brokers with a live ZooKeeper registration."""
        try:
            return {int(child) for child in self.zk.get_children(paths.BROKER_IDS)}
        except NoNodeError:
            return set()

    def partition_state(self, topic: str, partition: int) -> dict[str, object] | None:
        """``{"leader", "leader_epoch", "isr", ...}`` as the controller last wrote it."""
        return self._read_json(f"{paths.BROKER_TOPICS}/{topic}/partitions/{partition}/state")

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader in ZooKeeper (-1: none)."""
        state = self.partition_state(topic, partition)
        return -1 if state is None else int(str(state["leader"]))

    def isr(self, topic: str, partition: int) -> list[int]:
        state = self.partition_state(topic, partition)
        isr = [] if state is None else state["isr"]
        assert isinstance(isr, list)
        return [int(b) for b in isr]

    def _close_zk(self) -> None:
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
            self._zk = None

    def outputs(self) -> str:
        """Every broker's latest output tail, for a failing test's message."""
        return "\n".join(
            f"--- broker {i} ({'running' if b.running else 'stopped'}):\n{b.output_tail()}"
            for i, b in self.brokers.items()
        )

    def __iter__(self) -> Iterator[BrokerProcess]:
        return iter(self.brokers.values())


def tiered_settings(bucket: Path) -> dict[str, object]:
    """Tiering on through the fsspec plugin to the directory ``bucket``, with tasks quick
    enough to watch and small internal topics: what tests and benchmarks of process clusters
    start from (Kafka's ``replica.lag.time.max.ms`` is theirs to set)."""
    return {
        "remote.log.storage.system.enable": True,
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.url": bucket.as_uri(),
        "remote.log.manager.task.interval.ms": 500,
        "offsets.topic.num.partitions": 3,
        "rlmm.config.remote.log.metadata.topic.num.partitions": 3,
    }


def _property(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
