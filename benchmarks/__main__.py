"""Run every benchmark: ``python -m benchmarks [--quick] [--json FILE] [--only NAME]``.

Each ``benchmarks/<area>_bench.py`` module exposes ``run(quick: bool) -> list[dict]``; a row is
``{name, value, unit, baseline, ratio, target, ok}`` where the baseline was measured in the same
run on the same machine, so the ratio is meaningful even when absolute numbers are not. The exit
status is 0 even when a target is missed: a benchmark reports, it does not gate.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

FIELDS = ("name", "value", "unit", "baseline", "ratio", "target", "ok")


def discover() -> list[str]:
    here = Path(__file__).parent
    return sorted(path.stem for path in here.glob("*_bench.py"))


def run_module(module_name: str, quick: bool) -> list[dict[str, Any]]:
    module = importlib.import_module(f"benchmarks.{module_name}")
    rows = module.run(quick)
    for row in rows:
        missing = [field for field in FIELDS if field not in row]
        if missing:
            raise ValueError(f"{module_name}: row {row.get('name')!r} lacks {missing}")
    return [{field: row[field] for field in FIELDS} for row in rows]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return "-" if value is None else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short runs, smaller data")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON to FILE")
    parser.add_argument(
        "--only", action="append", help="run only these modules (e.g. log_bench or reliability)"
    )
    args = parser.parse_args(argv)

    console = Console()
    rows: list[dict[str, Any]] = []
    failures = 0
    for module_name in discover():
        if args.only and not {module_name, module_name.removesuffix("_bench")} & set(args.only):
            continue
        console.print(f"[bold]{module_name}[/bold] ...")
        try:
            rows.extend(run_module(module_name, args.quick))
        except Exception:  # a broken benchmark must not hide the others' figures
            failures += 1
            console.print(f"[red]{module_name} failed[/red]\n{traceback.format_exc()}")

    table = Table(title="tierlog benchmarks" + (" (quick)" if args.quick else ""))
    for column in ("name", "value", "unit", "baseline", "ratio", "target", "ok"):
        table.add_column(column, justify="left" if column == "name" else "right")
    for row in rows:
        table.add_row(
            row["name"],
            _fmt(row["value"]),
            row["unit"],
            _fmt(row["baseline"]),
            _fmt(row["ratio"]),
            str(row["target"] or "-"),
            {True: "[green]yes[/green]", False: "[red]NO[/red]"}.get(row["ok"], "-"),
        )
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
        console.print(f"wrote {len(rows)} rows to {args.json}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
