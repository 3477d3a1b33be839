"""Real ZooKeeper servers as child processes, for tests, demos and ``tierlog zookeeper``.

tierlog does not ship ZooKeeper: it runs the one Debian packages (``apt-get install zookeeper``,
``/usr/share/java/zookeeper.jar``, whose manifest names its own dependencies) on the JVM the
project already needs. Each node gets its own directory (``zoo.cfg``, ``data/myid``, and
``zookeeper.log`` with everything the JVM prints), its own free ports on one host, and a capped
heap. A start returns only once every node serves and a client session can be opened, so a test
never races the ensemble's leader election.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Final

from ..errors import TierlogError

#: Where Debian's ``zookeeper`` package puts the server.
ZOOKEEPER_JAR: Final = Path("/usr/share/java/zookeeper.jar")
#: The jar carries no logging binding; without one the server says nothing at all.
_LOG_BINDING_JARS: Final = (
    Path("/usr/share/java/slf4j-simple.jar"),
    Path("/usr/share/java/slf4j-nop.jar"),
)
_MAIN_CLASS: Final = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_SERVING_MODES: Final = ("standalone", "leader", "follower", "observer")
_LOG_TAIL_LINES: Final = 30
_BIND_ATTEMPTS: Final = 3


class ZooKeeperServerError(TierlogError):
    """A local ZooKeeper server could not be started or did not come to serve.

    ``summary`` is one line (with the Java exception that stopped the node, when its log has
    one); the message adds the end of the node's log.
    """

    def __init__(self, summary: str, log_path: Path | None = None, log_offset: int = 0) -> None:
        self.summary = summary
        self.log_path = log_path
        self.log_tail = None if log_path is None else _tail(log_path, offset=log_offset)
        if log_path is None:
            super().__init__(summary)
        else:
            super().__init__(f"{summary}; last lines of {log_path}:\n{self.log_tail}")


class ZooKeeperNotInstalledError(ZooKeeperServerError):
    """Java or the ZooKeeper jar is missing on this machine."""


def find_free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (ZooKeeper has no "port 0": it must be told one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def java_executable() -> str:
    """The ``java`` of ``JAVA_HOME``, else the one on PATH; raises when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise ZooKeeperNotInstalledError(
            "no java found (JAVA_HOME or PATH): ZooKeeper needs a Java runtime; "
            "install the Debian package 'zookeeper' (it brings one)"
        )
    return found


def check_installed(jar: Path = ZOOKEEPER_JAR) -> tuple[str, Path]:
    """The java executable and the ZooKeeper jar, or a clear error naming what to install."""
    if not jar.is_file():
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper is not installed: {jar} is missing; install the Debian package 'zookeeper'"
        )
    return java_executable(), jar


def four_letter_word(host: str, port: int, command: str, timeout_s: float = 1.0) -> str:
    """Send one of ZooKeeper's four-letter commands (``ruok``, ``srvr``...) and read the answer."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(command.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def serving_mode(host: str, port: int, timeout_s: float = 1.0) -> str | None:
    """``standalone``, ``leader`` or ``follower`` when the node serves clients, else None."""
    try:
        if four_letter_word(host, port, "ruok", timeout_s) != "imok":
            return None
        answer = four_letter_word(host, port, "srvr", timeout_s)
    except OSError:
        return None
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            mode = line.partition(":")[2].strip()
            return mode if mode in _SERVING_MODES else None
    return None


_JAVA_EXCEPTION: Final = re.compile(r"^(Caused by: )?((?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b.*)")


def _java_failure(path: Path, offset: int = 0) -> str | None:
    """The Java exception that stopped a node, from its log: the innermost cause if any."""
    found = None
    for line in _tail(path, 200, offset).splitlines():
        match = _JAVA_EXCEPTION.match(line.strip())
        if match and (found is None or match.group(1)):
            found = match.group(2)
    return found


def _tail(path: Path, lines: int = _LOG_TAIL_LINES, offset: int = 0) -> str:
    """The last ``lines`` of a log, from byte ``offset`` on (where the latest run began)."""
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def _stop_process(process: subprocess.Popen[bytes], grace_s: float) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _stop_all(processes: list[subprocess.Popen[bytes] | None]) -> None:
    """Last resort when an ensemble is dropped unstopped: no JVM outlives its parent's intent."""
    for process in processes:
        if process is not None:
            _stop_process(process, grace_s=2.0)


class ZooKeeperNode:
    """One server of an ensemble: its directory, ports and (while it runs) its process."""

    def __init__(
        self,
        index: int,
        directory: Path,
        host: str,
        client_port: int,
        quorum_port: int | None,
        election_port: int | None,
    ) -> None:
        self.index = index
        self.myid = index + 1
        self.directory = directory
        self.host = host
        self.client_port = client_port
        self.quorum_port = quorum_port
        self.election_port = election_port
        self.process: subprocess.Popen[bytes] | None = None
        #: Where the log of the latest start begins (the log file keeps every start).
        self.log_offset = 0

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def config_path(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def serving_mode(self) -> str | None:
        return serving_mode(self.host, self.client_port) if self.running else None

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The end of the log of the node's latest start."""
        return _tail(self.log_path, lines, self.log_offset)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"ZooKeeperNode(myid={self.myid}, {self.address}, {state})"


class ZooKeeperEnsemble:
    """``size`` ZooKeeper servers on one host, each a child process with its own directory.

    ``client_port`` 0 picks free ports; otherwise node *i* listens on ``client_port + i``.
    The nodes keep their ports for the ensemble's life, so a node stopped or killed comes
    back with ``start_node`` as the same member.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        size: int = 1,
        *,
        tick_ms: int = 500,
        heap_mb: int = 64,
        host: str = "127.0.0.1",
        client_port: int = 0,
        max_session_timeout_ms: int = 60_000,
        jar: Path = ZOOKEEPER_JAR,
    ) -> None:
        if size < 1:
            raise ValueError(f"an ensemble needs at least 1 node, got {size}")
        if tick_ms < 1 or heap_mb < 16:
            raise ValueError(f"tick_ms must be >= 1 and heap_mb >= 16, got {tick_ms}, {heap_mb}")
        if not 0 <= client_port <= 65535 - size + 1:
            raise ValueError(f"client_port must be 0 or a TCP port, got {client_port}")
        self.data_dir = Path(data_dir)
        self.size = size
        self.tick_ms = tick_ms
        self.heap_mb = heap_mb
        self.host = host
        self.max_session_timeout_ms = max_session_timeout_ms
        self.jar = jar
        self._free_ports = client_port == 0
        quorum = size > 1
        self._nodes = tuple(
            ZooKeeperNode(
                index,
                self.data_dir / f"node-{index + 1}",
                host,
                client_port + index if client_port else find_free_port(host),
                find_free_port(host) if quorum else None,
                find_free_port(host) if quorum else None,
            )
            for index in range(size)
        )
        self._processes: list[subprocess.Popen[bytes] | None] = [None] * size
        self._finalizer = weakref.finalize(self, _stop_all, self._processes)

    def _pick_ports(self) -> None:
        for node in self._nodes:
            node.client_port = find_free_port(self.host)
            if node.quorum_port is not None:
                node.quorum_port = find_free_port(self.host)
                node.election_port = find_free_port(self.host)

    @property
    def nodes(self) -> tuple[ZooKeeperNode, ...]:
        return self._nodes

    @property
    def connect_string(self) -> str:
        """The ``zookeeper.connect`` value reaching every node (without a chroot)."""
        return ",".join(node.address for node in self._nodes)

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> None:
        """Start every node; returns once all serve and a client session opens.

        A free port can be taken by someone else between being picked and being bound; when
        the ports were picked here and a node finds its port taken, fresh ones are tried.
        """
        deadline = time.monotonic() + timeout_s
        for attempt in range(_BIND_ATTEMPTS):
            try:
                for node in self._nodes:
                    self._launch(node)
                for node in self._nodes:
                    self._wait_serving(node, deadline)
                self._wait_session(deadline)
                return
            except ZooKeeperServerError as err:
                self.stop()
                port_taken = "BindException" in err.summary
                if not (port_taken and self._free_ports and attempt + 1 < _BIND_ATTEMPTS):
                    raise
                self._pick_ports()
            except BaseException:
                self.stop()
                raise

    def start_node(self, index: int, timeout_s: float = 30.0) -> None:
        """Start one stopped or killed node again and wait until it serves."""
        node = self._nodes[index]
        if node.running:
            raise ZooKeeperServerError(f"{node!r} is already running")
        self._launch(node)
        self._wait_serving(node, time.monotonic() + timeout_s)

    def stop_node(self, index: int, grace_s: float = 5.0) -> None:
        """Stop one node the polite way (SIGTERM, then SIGKILL after ``grace_s``)."""
        process = self._nodes[index].process
        if process is not None:
            _stop_process(process, grace_s)
        self._forget(index)

    def kill(self, index: int) -> None:
        """SIGKILL one node, as a crash would; its data stays for ``start_node``."""
        process = self._nodes[index].process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
        self._forget(index)

    def stop(self) -> None:
        """Stop every node; safe to call twice."""
        for index in range(self.size):
            self.stop_node(index)

    def __enter__(self) -> ZooKeeperEnsemble:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperEnsemble({self.connect_string!r}, size={self.size})"

    # --- internals -----------------------------------------------------------------------------

    def _forget(self, index: int) -> None:
        self._nodes[index].process = None
        self._processes[index] = None

    def _config_text(self, node: ZooKeeperNode) -> str:
        lines = [
            f"tickTime={self.tick_ms}",
            "initLimit=10",
            "syncLimit=5",
            f"dataDir={node.data_dir}",
            f"clientPort={node.client_port}",
            f"clientPortAddress={self.host}",
            # ZooKeeper caps sessions at 20 ticks by default: too short for Kafka's 18 s default.
            f"maxSessionTimeout={max(self.max_session_timeout_ms, 2 * self.tick_ms)}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,mntr",
            # Transaction logs are preallocated 64 MiB at a time by default.
            "preAllocSize=4096",
            "autopurge.purgeInterval=0",
        ]
        if self.size > 1:
            for member in self._nodes:
                lines.append(
                    f"server.{member.myid}={member.host}:{member.quorum_port}:"
                    f"{member.election_port}"
                )
        return "\n".join(lines) + "\n"

    def _command(self, java: str, node: ZooKeeperNode) -> list[str]:
        classpath = [str(self.jar)]
        binding = next((jar for jar in _LOG_BINDING_JARS if jar.is_file()), None)
        if binding is not None:
            classpath.append(str(binding))
        return [
            java,
            f"-Xmx{self.heap_mb}m",
            # One core's worth of JVM: little memory and no GC threads fighting the tests.
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
            "-cp",
            os.pathsep.join(classpath),
            _MAIN_CLASS,
            str(node.config_path),
        ]

    def _launch(self, node: ZooKeeperNode) -> None:
        java, _ = check_installed(self.jar)
        node.data_dir.mkdir(parents=True, exist_ok=True)
        (node.data_dir / "myid").write_text(f"{node.myid}\n")
        node.config_path.write_text(self._config_text(node))
        with open(node.log_path, "ab") as log:
            node.log_offset = log.tell()
            process = subprocess.Popen(
                self._command(java, node),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=node.directory,
            )
        node.process = process
        self._processes[node.index] = process

    def _wait_serving(self, node: ZooKeeperNode, deadline: float) -> None:
        while True:
            process = node.process
            if process is None or process.poll() is not None:
                code = None if process is None else process.returncode
                failure = _java_failure(node.log_path, node.log_offset)
                raise ZooKeeperServerError(
                    f"ZooKeeper node {node.myid} ({node.address}) exited with code {code} "
                    f"while starting" + (f": {failure}" if failure else ""),
                    node.log_path,
                    node.log_offset,
                )
            if node.serving_mode() is not None:
                return
            if time.monotonic() >= deadline:
                raise ZooKeeperServerError(
                    f"ZooKeeper node {node.myid} ({node.address}) did not serve in time",
                    node.log_path,
                    node.log_offset,
                )
            time.sleep(0.05)

    def _wait_session(self, deadline: float) -> None:
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(hosts=self.connect_string)
        try:
            client.start(timeout=max(deadline - time.monotonic(), 1.0))
            client.get("/")
        except KazooTimeoutError as err:
            raise ZooKeeperServerError(
                f"ZooKeeper at {self.connect_string} serves but no session could be opened"
            ) from err
        finally:
            with contextlib.suppress(Exception):
                client.stop()
            client.close()


def log_tails(ensemble: ZooKeeperEnsemble, lines: int = _LOG_TAIL_LINES) -> str:
    """The end of every node's log, for a failing test's message."""
    return "\n".join(f"--- node {n.myid} ---\n{n.log_tail(lines)}" for n in ensemble.nodes)
