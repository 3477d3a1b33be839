"""``tierlog run``: run an embedded cluster until interrupted.

Loads the configuration exactly as a broker does (file, then environment), starts the
brokers, says when they serve, and on SIGINT or SIGTERM shuts them down cleanly (logs closed
with their clean-shutdown marker, plugins closed) and exits 0. A configuration that cannot be
read or is not valid, or a data directory another process holds, is one line on stderr and
exit status 2.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import NoReturn

import click

from ..cluster import EmbeddedCluster
from ..config import BrokerConfig, load_sources
from ..errors import ConfigFileError, TierlogError

log = logging.getLogger(__name__)

_FAILED = 2


@click.command("run")
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    required=True,
    help="Broker configuration, TOML (.toml) or Kafka-style .properties.",
)
@click.option(
    "--brokers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Number of brokers in the embedded cluster.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where brokers keep their logs and the controller its metadata "
    "[default: the first of log.dirs].",
)
@click.pass_context
def run_command(ctx: click.Context, config_file: Path, brokers: int, data_dir: Path | None) -> None:
    """Run an embedded cluster until SIGINT or SIGTERM."""
    try:
        raw = load_sources(config_file, os.environ)
        config = BrokerConfig.from_mapping(raw)
    except ConfigFileError as err:
        _fail(ctx, str(err))
    except TierlogError as err:
        _fail(ctx, f"{config_file}: {err}")
    if data_dir is None:
        data_dir = Path(config.get_list("log.dirs")[0])
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with EmbeddedCluster(brokers, data_dir, raw) as cluster:
            click.echo(
                f"tierlog: {brokers} broker(s) serving, cluster id "
                f"{cluster.controller.cluster_id}, data in {data_dir}",
                err=True,
            )
            while not stop.wait(0.2):
                pass
            click.echo("tierlog: shutting down", err=True)
        click.echo("tierlog: stopped", err=True)
    except (TierlogError, OSError) as err:
        _fail(ctx, str(err))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _fail(ctx: click.Context, message: str) -> NoReturn:
    """One line on stderr and exit status 2, as for every tierlog error."""
    click.echo(f"error: {message}", err=True)
    ctx.exit(_FAILED)
