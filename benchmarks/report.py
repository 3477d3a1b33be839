"""One benchmark figure as the JSON report lists it: ``{name, value, unit, baseline, ratio,
target, ok}``."""

from __future__ import annotations

from typing import Any


def row(
    name: str,
    value: float,
    unit: str,
    baseline: float | None,
    target: float | None,
    *,
    higher_is_better: bool = True,
) -> dict[str, Any]:
    """The figure beside its same-run baseline. ``target`` applies to the ratio, or to the
    value itself where there is no baseline; without a target the row only reports."""
    ratio = value / baseline if baseline else None
    if target is None:
        ok = None
    elif ratio is not None:
        ok = ratio >= target if higher_is_better else ratio <= target
    else:
        ok = value >= target if higher_is_better else value <= target
    return {
        "name": name,
        "value": round(value, 3),
        "unit": unit,
        "baseline": None if baseline is None else round(baseline, 3),
        "ratio": None if ratio is None else round(ratio, 3),
        "target": target,
        "ok": ok,
    }
