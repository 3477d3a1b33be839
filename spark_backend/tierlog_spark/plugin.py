"""Entry point module of the ``spark`` plugin: kept import-light, pyspark loads only when used."""

from __future__ import annotations

import click
import tierlog


@tierlog.hookimpl
def tierlog_register_cli_commands(cli: click.Group) -> None:
    """Add ``tierlog spark ...``."""
    from .cli import spark_group

    cli.add_command(spark_group)
