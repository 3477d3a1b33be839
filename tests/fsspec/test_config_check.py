"""``tierlog config --check`` on a file configuring the fsspec plugin."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from tierlog.cli import main


def check(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "server.properties"
    path.write_text(text)
    result = CliRunner().invoke(main, ["config", "--check", str(path)])
    return result.exit_code, result.output


def test_free_form_storage_options_pass_the_check(tmp_path: Path) -> None:
    code, output = check(
        tmp_path,
        "plugin.fsspec.url=s3://bucket/prefix\n"
        "plugin.fsspec.storage.client_kwargs.endpoint_url=http://127.0.0.1:9000\n"
        "plugin.fsspec.storage.anon=false\n",
    )
    assert code == 0, output
    assert "OK" in output


def test_a_misspelled_plugin_key_is_named(tmp_path: Path) -> None:
    code, output = check(tmp_path, "plugin.fsspec.url=memory://x\nplugin.fsspec.chunk.sise=1\n")
    assert code == 2
    assert "plugin.fsspec.chunk.sise" in output and "plugin.fsspec.chunk.size" in output
