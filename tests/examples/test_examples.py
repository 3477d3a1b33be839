"""The examples run as a user runs them: a fresh interpreter, the installed distributions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tierlog_fsspec")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    env.pop("TIERLOG_DISABLE_PLUGIN_AUTOLOAD", None)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def test_quickstart_tiers_and_reads_back() -> None:
    result = run_example(str(EXAMPLES / "quickstart.py"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "produced 300 records to quickstart-0"
    assert lines[1].startswith("tiered: offsets 0..")
    assert lines[2] == "consumed all 300 records from offset 0, remote and local alike"


def test_integrator_alters_a_dynamic_config_and_exports_metrics(tmp_path: Path) -> None:
    result = run_example(str(EXAMPLES / "integrator" / "run.py"), str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "remote.fetch.max.wait.ms at start: 500" in result.stderr
    assert "remote.fetch.max.wait.ms now: 1000" in result.stderr
    assert "# TYPE tierlog_brokertopicmetrics_remotecopybytespersec_total counter" in result.stdout
    assert any(p.is_file() for p in (tmp_path / "remote").rglob("*"))
