"""Real (tiny) installed distributions on a temporary sys.path entry, for discovery tests.

importlib.metadata finds them exactly as it finds anything pip installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def install_distribution(
    site: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    dist: str,
    entry_points: dict[str, str],
    modules: dict[str, str],
    version: str = "1.0",
) -> None:
    """Write ``<dist>-<version>.dist-info`` with a ``tierlog`` entry point group, plus modules."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[tierlog]\n{lines}")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(site))
