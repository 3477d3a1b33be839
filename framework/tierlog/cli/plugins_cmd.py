"""``tierlog plugins``: what is installed, where it came from, and what it provides."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from ..plugins import make_plugin_manager


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins_command(as_json: bool) -> None:
    """List installed plugins: entry point name, distribution, version, roles and hooks."""
    rows = make_plugin_manager().info()
    if as_json:
        click.echo(json.dumps([row.to_dict() for row in rows], indent=2))
        return
    table = Table(title="tierlog plugins")
    for column in ("name", "distribution", "version", "roles", "hooks"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row.name,
            "(built-in)" if row.builtin else row.distribution or "-",
            row.version or "-",
            "\n".join(row.roles) or "-",
            "\n".join(hook.removeprefix("tierlog_") for hook in row.hooks),
        )
    Console().print(table)
