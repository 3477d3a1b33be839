"""``tierlog groups``: list, describe, reset the offsets of and delete consumer groups.

The same operations and output columns as Kafka's ``kafka-consumer-groups.sh``, over any
listener (``--bootstrap-server``); the work is done in ``consumer_groups.py``. Errors are one
``Error: ...`` line on stderr and exit status 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from .consumer_groups import (
    ConsumerGroups,
    GroupsToolError,
    ResetStrategy,
    parse_datetime,
    parse_topic_scope,
)

F = TypeVar("F", bound=Callable[..., Any])

_DESCRIBE_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


def _bootstrap(fn: F) -> F:
    return click.option(
        "--bootstrap-server",
        "bootstrap_server",
        required=True,
        envvar="TIERLOG_BOOTSTRAP_SERVER",
        help="host:port of a listener (several comma-separated); or $TIERLOG_BOOTSTRAP_SERVER.",
    )(fn)


@contextmanager
def _connected(bootstrap_server: str) -> Iterator[ConsumerGroups]:
    """The connection; a GroupsToolError inside the block becomes the command's error."""
    try:
        with ConsumerGroups(bootstrap_server) as groups:
            yield groups
    except GroupsToolError as err:
        raise click.ClickException(str(err)) from None


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(header)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join(
        " ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


@click.group("groups")
def groups_command() -> None:
    """Consumer groups: list, describe (offsets, lag, members), reset offsets, delete."""


@groups_command.command("list")
@_bootstrap
@click.option("--state", "with_state", is_flag=True, help="Show each group's state too.")
def list_command(bootstrap_server: str, with_state: bool) -> None:
    """Every consumer group of the cluster, one per line."""
    with _connected(bootstrap_server) as groups:
        found = groups.list_groups()
    if with_state:
        click.echo(_table(("GROUP", "STATE"), found))
    else:
        for group, _state in found:
            click.echo(group)


@groups_command.command("describe")
@_bootstrap
@click.argument("group")
@click.option("--members", is_flag=True, help="List the members and their assignments instead.")
def describe_command(bootstrap_server: str, group: str, members: bool) -> None:
    """Per partition: committed offset, log-end offset, lag and the member consuming it."""
    with _connected(bootstrap_server) as groups:
        description = groups.describe(group)
    if description.state in ("PreparingRebalance", "CompletingRebalance"):
        click.echo(f"Warning: consumer group '{group}' is rebalancing.", err=True)
    if not description.members:
        click.echo(f"Consumer group '{group}' has no active members.\n")
    if members:
        member_rows = [
            (
                group,
                m.consumer_id,
                m.host,
                m.client_id,
                len(m.partitions),
                ",".join(f"{t}-{p}" for t, p in m.partitions),
            )
            for m in description.members
        ]
        header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
        click.echo(_table(header, member_rows))
        return
    rows = [
        (
            r.group,
            r.topic,
            r.partition,
            r.current_offset,
            r.log_end_offset,
            r.lag,
            r.consumer_id,
            r.host,
            r.client_id,
        )
        for r in description.offsets
    ]
    click.echo(_table(_DESCRIBE_COLUMNS, rows))


@groups_command.command("reset-offsets")
@_bootstrap
@click.argument("group")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,...]",
    help="A topic, or some of its partitions; repeatable.",
)
@click.option("--all-topics", is_flag=True, help="Every partition the group has an offset for.")
@click.option("--to-earliest", is_flag=True, help="To the log start (remote tier included).")
@click.option("--to-latest", is_flag=True, help="To the log end.")
@click.option(
    "--to-datetime",
    metavar="YYYY-MM-DDTHH:mm:SS.sss[ZONE]",
    help="To the first record at or after this time (the log end if none).",
)
@click.option("--to-offset", type=int, help="To this offset, clamped to the log's range.")
@click.option("--dry-run", is_flag=True, help="Show the new offsets only (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
def reset_offsets_command(
    bootstrap_server: str,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: str | None,
    to_offset: int | None,
    dry_run: bool,
    execute: bool,
) -> None:
    """Move the committed offsets of an inactive group."""
    if bool(topics) == all_topics:
        raise click.UsageError("give either --topic (repeatable) or --all-topics")
    chosen = [
        name
        for name, given in (
            ("--to-earliest", to_earliest),
            ("--to-latest", to_latest),
            ("--to-datetime", to_datetime is not None),
            ("--to-offset", to_offset is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset"
        )
    if dry_run and execute:
        raise click.UsageError("--dry-run and --execute exclude each other")
    try:
        if to_datetime is not None:
            strategy = ResetStrategy("datetime", parse_datetime(to_datetime))
        elif to_offset is not None:
            strategy = ResetStrategy("offset", to_offset)
        else:
            strategy = ResetStrategy("earliest" if to_earliest else "latest")
        scope = [parse_topic_scope(spec) for spec in topics]
    except GroupsToolError as err:
        raise click.ClickException(str(err)) from None
    if not execute and not dry_run:
        click.echo(
            "WARN: no action is performed without --execute; showing the new offsets "
            "(as --dry-run does).",
            err=True,
        )
    with _connected(bootstrap_server) as groups:
        partitions = groups.partitions_of(group, scope, all_topics)
        plan = groups.plan_reset(group, partitions, strategy)
        if execute:
            groups.execute_reset(group, plan)
    rows = [
        (group, topic, partition, offset) for (topic, partition), offset in sorted(plan.items())
    ]
    click.echo(_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows))


@groups_command.command("delete")
@_bootstrap
@click.argument("group_ids", nargs=-1, required=True, metavar="GROUP...")
def delete_command(bootstrap_server: str, group_ids: tuple[str, ...]) -> None:
    """Delete inactive groups and their committed offsets."""
    with _connected(bootstrap_server) as groups:
        results = groups.delete(list(dict.fromkeys(group_ids)))
    deleted = [g for g, error in results.items() if error is None]
    failed = {g: error for g, error in results.items() if error is not None}
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        click.echo(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        for group, error in failed.items():
            click.echo(f"Error: group '{group}' was not deleted: {error}", err=True)
        raise SystemExit(1)
