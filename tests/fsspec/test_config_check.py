"""``tierlog config --check`` on a file configuring the fsspec plugin."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from click.testing import CliRunner
from tierlog.cli import main
from tierlog.cluster import EmbeddedCluster
from tierlog.config import load_sources
from tierlog.errors import InvalidConfigError


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


RING_KEY = base64.b64encode(b"r" * 32).decode()


def tiered(tmp_path: Path, **rsm: str) -> str:
    """A file choosing the fsspec plugin, its slice under rsm.config."""
    lines = [
        "remote.log.storage.system.enable=true",
        "remote.log.storage.manager.name=fsspec",
        "remote.log.metadata.manager.name=memory",
        f"rsm.config.url=file://{tmp_path / 'bucket'}",
        *(f"rsm.config.{key}={value}" for key, value in rsm.items()),
    ]
    return "\n".join(lines) + "\n"


def run_refusal(tmp_path: Path, text: str) -> str:
    """What a broker started with the same file says (the check must say the same)."""
    path = tmp_path / "run.properties"
    path.write_text(text)
    cluster = EmbeddedCluster(1, tmp_path / "data", load_sources(path, {}))
    with pytest.raises(InvalidConfigError) as caught:
        cluster.start()
    return str(caught.value)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"chunk.size": "1"}, "rsm.config.chunk.size = '1': must be between 4096 and"),
        ({"encryption.keys": "k1"}, "rsm.config.encryption.keys: entry 1 is not 'id:base64key'"),
        ({"encryption.keys": f"k1:{RING_KEY}!"}, "key 'k1' is not valid base64"),
        ({"chunk.sise": "8192"}, "unknown configuration key 'rsm.config.chunk.sise'"),
        (
            {"storage.a": "1", "storage.a.b": "2"},
            "rsm.config.storage.a.b nests under a storage option that already has a value",
        ),
        ({"url": "s3://AKIAX:ab/cd+ef@bucket/p"}, "rsm.config.url must not carry credentials"),
    ],
)
def test_check_refuses_what_run_refuses_in_the_chosen_plugins_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], named: str
) -> None:
    monkeypatch.setenv("TIERLOG_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("TIERLOG_PLUGINS", "fsspec")
    good = tiered(tmp_path, **{"chunk.size": "8192", "encryption.keys": f"k1:{RING_KEY}"})
    assert check(tmp_path, good) == (0, f"OK: {tmp_path / 'server.properties'}\n")
    assert not (tmp_path / "bucket").exists(), "the check configures nothing"
    text = tiered(tmp_path, **settings)

    code, output = check(tmp_path, text)

    assert code == 2, output
    assert "OK" not in output
    assert named in output
    refused = run_refusal(tmp_path, text)
    assert named in refused
    assert refused in output, "the check and the start-up validate through the same code"
    for secret in (RING_KEY, "ab/cd+ef"):
        assert secret not in output


def test_check_names_a_storage_manager_that_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERLOG_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("TIERLOG_PLUGINS", "fsspec")
    code, output = check(
        tmp_path, tiered(tmp_path).replace("manager.name=fsspec", "manager.name=fsspek")
    )
    assert code == 2
    assert "remote.log.storage.manager.name = 'fsspek'" in output
