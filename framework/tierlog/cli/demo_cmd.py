"""``tierlog demo``: the end-to-end demo on embedded defaults."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

from ..demo import run_demo, summary_rows


@click.command("demo")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the demo's local and remote data here (default: a temporary directory).",
)
@click.option("--records", default=30_000, show_default=True, type=click.IntRange(1, 10_000_000))
def demo_command(data_dir: Path | None, records: int) -> None:
    """Run an embedded cluster: produce, tier, consume back from both tiers, verify every byte."""
    console = Console()
    with tempfile.TemporaryDirectory(prefix="tierlog-demo-") as scratch:
        root = data_dir or Path(scratch)
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
        ) as bar:
            tasks: dict[str, TaskID] = {}

            def step(what: str, done: int, total: int) -> None:
                if what not in tasks:
                    tasks[what] = bar.add_task(what, total=total)
                bar.update(tasks[what], completed=done)

            report = run_demo(root, records=records, progress=step)
        table = Table(title="tierlog demo")
        table.add_column("what")
        table.add_column("value", justify="right")
        for name, value in summary_rows(report):
            table.add_row(name, str(value))
        console.print(table)
        for note in report.notes:
            console.print(f"[yellow]note:[/yellow] {note}")
        console.print(
            "[green]OK[/green]: every record consumed from both tiers matches what was produced."
        )
