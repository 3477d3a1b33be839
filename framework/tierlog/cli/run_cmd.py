"""``tierlog run``: run an embedded cluster until interrupted.

Loads the configuration exactly as a broker does (file, then environment), starts the
brokers with their Kafka listeners (broker i on the ``listeners`` port plus i, port 0 picking a
free one), prints the bootstrap servers, serves every broker's metrics for Prometheus when
``metrics.prometheus.port`` is set, says when they serve, and on SIGINT or SIGTERM shuts them
down cleanly (logs closed with their clean-shutdown marker, plugins closed) and exits 0. A
configuration that cannot be read or is not valid, a data directory another process holds, or a
port in use is one line on stderr and exit status 2.

The metrics of all brokers come from one ``/metrics`` endpoint, each series labelled with its
broker's id (``broker="0"``), so the same metric of two brokers is two series of one family.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import NoReturn

import click

from ..cluster import EmbeddedCluster
from ..config import BrokerConfig, load_sources
from ..errors import ConfigFileError, TierlogError
from ..metrics import (
    LabelledRegistriesCollector,
    MetricsRegistry,
    PrometheusServer,
    serve_collector,
)

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
@click.option(
    "--broker-id",
    type=click.IntRange(min=0),
    default=None,
    help="This broker's id (broker.id) in a multi-process cluster (zookeeper.connect set).",
)
@click.option(
    "--listen/--no-listen",
    default=True,
    show_default=True,
    help="Accept Kafka clients on the configured listeners.",
)
@click.pass_context
def run_command(
    ctx: click.Context,
    config_file: Path,
    brokers: int,
    broker_id: int | None,
    data_dir: Path | None,
    listen: bool,
) -> None:
    """Run an embedded cluster, or one broker of a ZooKeeper cluster, until SIGINT or SIGTERM."""
    try:
        raw = load_sources(config_file, os.environ)
        if broker_id is not None:
            raw = {**raw, "broker.id": broker_id}
        config = BrokerConfig.from_mapping(raw)
    except ConfigFileError as err:
        _fail(ctx, str(err))
    except TierlogError as err:
        _fail(ctx, f"{config_file}: {err}")
    if config.get_str("zookeeper.connect"):
        if brokers != 1:
            _fail(ctx, "--brokers: a broker of a ZooKeeper cluster runs one per process")
        if not listen:
            _fail(ctx, "--no-listen: brokers of a ZooKeeper cluster reach each other over TCP")
        _run_node(ctx, config)
        return
    if data_dir is None:
        data_dir = Path(config.get_list("log.dirs")[0])
    with _stop_signals() as stop, _failures(ctx):
        with (
            EmbeddedCluster(brokers, data_dir, raw, listen=listen) as cluster,
            _prometheus(cluster, _metrics_port(config)) as metrics,
        ):
            if listen:
                click.echo(f"tierlog: bootstrap servers {cluster.bootstrap_servers}", err=True)
            _echo_metrics(metrics)
            click.echo(
                f"tierlog: {brokers} broker(s) serving, cluster id "
                f"{cluster.controller.cluster_id}, data in {data_dir}",
                err=True,
            )
            while not stop.wait(0.2):
                pass
            click.echo("tierlog: shutting down", err=True)
        click.echo("tierlog: stopped", err=True)


def _run_node(ctx: click.Context, config: BrokerConfig) -> None:
    """One broker of a multi-process cluster; SIGTERM is a controlled shutdown."""
    from ..coordination.node import ClusterNode  # only a multi-process broker needs ZooKeeper

    node = ClusterNode(config)
    with _stop_signals() as stop, _failures(ctx), node:
        assert node.broker is not None and node.broker.plugin_host is not None
        registries = {str(node.broker_id): node.broker.plugin_host.metrics}
        with _serve_metrics(lambda: registries, _metrics_port(config)) as metrics:
            click.echo(f"tierlog: bootstrap servers {node.bootstrap_servers}", err=True)
            _echo_metrics(metrics)
            cluster_id = node.channel.cluster_id if node.channel is not None else ""
            click.echo(
                f"tierlog: broker {node.broker_id} serving, cluster id "
                f"{cluster_id or '(not known yet)'}, zookeeper "
                f"{config.get_str('zookeeper.connect')}",
                err=True,
            )
            while not stop.wait(0.2):
                pass
            click.echo("tierlog: controlled shutdown", err=True)
    click.echo("tierlog: stopped", err=True)


@contextmanager
def _stop_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while the block runs; the old handlers come back."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def _failures(ctx: click.Context) -> Iterator[None]:
    """A tierlog error or an OS error (a port in use, a directory held) as one line, exit 2."""
    try:
        yield
    except TierlogError as err:
        _fail(ctx, str(err))
    except OSError as err:
        # A bind failure carries its whole story in strerror; a file error needs its filename.
        _fail(ctx, err.strerror if err.strerror and err.filename is None else str(err))


def _echo_metrics(metrics: PrometheusServer | None) -> None:
    if metrics is not None:
        click.echo(f"tierlog: metrics at http://{metrics.host}:{metrics.port}/metrics", err=True)


@contextmanager
def _serve_metrics(
    registries: Callable[[], dict[str, MetricsRegistry]], port: int | None
) -> Iterator[PrometheusServer | None]:
    """The registries' metrics at ``/metrics`` on 127.0.0.1:``port``, each series labelled
    with its broker's id (None: not served)."""
    if port is None:
        yield None
        return
    try:
        server = serve_collector(LabelledRegistriesCollector(registries), port)
    except OSError as err:
        raise OSError(err.errno, f"cannot serve metrics on 127.0.0.1:{port}: {err}") from None
    with server:
        yield server


def _metrics_port(config: BrokerConfig) -> int | None:
    port = config["metrics.prometheus.port"]
    return None if port is None else config.get_int("metrics.prometheus.port")


@contextmanager
def _prometheus(cluster: EmbeddedCluster, port: int | None) -> Iterator[PrometheusServer | None]:
    """Every running broker's metrics at ``/metrics`` on 127.0.0.1:``port`` (None: not served),
    labelled ``broker``; stopped before the brokers are."""

    def registries() -> dict[str, MetricsRegistry]:
        found = {}
        for broker_id in cluster.broker_ids:
            host = cluster.broker(broker_id).plugin_host
            if host is not None:
                found[str(broker_id)] = host.metrics
        return found

    with _serve_metrics(registries, port) as server:
        yield server


def _fail(ctx: click.Context, message: str) -> NoReturn:
    """One line on stderr and exit status 2, as for every tierlog error."""
    click.echo(f"error: {message}", err=True)
    ctx.exit(_FAILED)
