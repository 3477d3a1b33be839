"""The ``tierlog`` command.

Subcommands live one per module; plugins add theirs through ``tierlog_register_cli_commands``.
"""

from __future__ import annotations

import logging
import sys

import click

from ..errors import TierlogError
from .config_cmd import config_command
from .demo_cmd import demo_command
from .docs_cmd import docs_command
from .groups_cmd import groups_command
from .plugins_cmd import plugins_command
from .run_cmd import run_command
from .zookeeper_cmd import zookeeper_command


class _TierlogGroup(click.Group):
    """Adds plugin commands on first use, and turns tierlog errors into one clear line."""

    _plugins_added = False

    def _add_plugin_commands(self) -> None:
        if self._plugins_added:
            return
        self._plugins_added = True
        from ..plugins import make_plugin_manager

        try:
            pm = make_plugin_manager()
        except TierlogError as err:
            click.echo(f"warning: plugin commands unavailable: {err}", err=True)
            return
        pm.hook.tierlog_register_cli_commands(cli=self)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            self._add_plugin_commands()
            command = super().get_command(ctx, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except TierlogError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)


@click.group(cls=_TierlogGroup)
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def main(verbose: int) -> None:
    """tierlog: Kafka-style tiered log storage."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


for _command in (
    config_command,
    demo_command,
    docs_command,
    groups_command,
    plugins_command,
    run_command,
    zookeeper_command,
):
    main.add_command(_command)
