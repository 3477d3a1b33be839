"""``tierlog zookeeper``: a local ZooKeeper ensemble for brokers run as separate processes.

Runs Debian's ZooKeeper (``apt-get install zookeeper``) as child processes in the foreground,
prints the ``zookeeper.connect`` value to give the brokers on stdout (the only line there, so a
script can read it), and on SIGINT or SIGTERM stops every node and exits 0. Missing Java or
ZooKeeper, a port in use, or a node that does not come up is one line on stderr and exit 2.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import NoReturn

import click

from ..coordination.zookeeper_server import ZooKeeperEnsemble, ZooKeeperServerError
from ..errors import TierlogError

log = logging.getLogger(__name__)

_FAILED = 2


@click.command("zookeeper")
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=2181,
    show_default=True,
    help="Client port of the first node; node i listens on the port plus i. 0 picks free ports.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("/tmp/tierlog-zookeeper"),
    show_default=True,
    help="Where the nodes keep their data and logs (a directory per node); kept across runs.",
)
@click.option(
    "--nodes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Number of ZooKeeper servers in the ensemble (3 survives the loss of one).",
)
@click.pass_context
def zookeeper_command(ctx: click.Context, port: int, data_dir: Path, nodes: int) -> None:
    """Run a local ZooKeeper ensemble until SIGINT or SIGTERM."""
    if port and port + nodes - 1 > 65535:
        _fail(ctx, f"--port {port} leaves no room for {nodes} nodes below 65536")
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, stopping ZooKeeper", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ensemble = ZooKeeperEnsemble(data_dir, nodes, client_port=port)
        ensemble.start()
        try:
            click.echo(f"zookeeper.connect={ensemble.connect_string}")
            click.echo(
                f"tierlog: {nodes} ZooKeeper node(s) serving at {ensemble.connect_string}, "
                f"data and logs in {data_dir}",
                err=True,
            )
            while not stop.wait(0.2):
                if not all(node.running for node in ensemble.nodes):
                    down = [str(node.myid) for node in ensemble.nodes if not node.running]
                    _fail(ctx, f"ZooKeeper node(s) {', '.join(down)} exited; see their logs")
            click.echo("tierlog: stopping ZooKeeper", err=True)
        finally:
            ensemble.stop()
        click.echo("tierlog: ZooKeeper stopped", err=True)
    except ZooKeeperServerError as err:
        _fail(ctx, f"{err.summary} (see {err.log_path})" if err.log_path else err.summary)
    except TierlogError as err:
        _fail(ctx, str(err))
    except OSError as err:
        _fail(ctx, str(err))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _fail(ctx: click.Context, message: str) -> NoReturn:
    """One line on stderr and exit status 2, as for every tierlog error."""
    click.echo(f"error: {message}", err=True)
    ctx.exit(_FAILED)
