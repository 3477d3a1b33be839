"""The installed distribution: discovery, `tierlog plugins`, import-lightness, lifecycle."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest
from click.testing import CliRunner
from tierlog.cli import main
from tierlog.errors import LifecycleError
from tierlog.host import PluginHost
from tierlog.plugins import ROLE_STORAGE, make_plugin_manager

from .conftest import Target


def test_the_entry_point_is_discovered_with_its_distribution_and_role(
    only_fsspec_plugin: None,
) -> None:
    pm = make_plugin_manager()
    rows = {row.name: row for row in pm.info()}
    assert rows["fsspec"].distribution == "tierlog-fsspec"
    assert rows["fsspec"].version
    assert rows["fsspec"].roles == (ROLE_STORAGE,)
    assert pm.providers(ROLE_STORAGE) == ["fsspec"]
    # one instance per runtime
    assert make_plugin_manager().get_plugin("fsspec") is not pm.get_plugin("fsspec")


def test_tierlog_plugins_shows_the_plugin_and_its_role(only_fsspec_plugin: None) -> None:
    result = CliRunner().invoke(main, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert rows["fsspec"]["distribution"] == "tierlog-fsspec"
    assert rows["fsspec"]["roles"] == ["RemoteStorageManager"]
    assert "tierlog_fetch_log_segment" in rows["fsspec"]["hooks"]


def test_tierlog_config_lists_the_keys_and_hides_secrets(only_fsspec_plugin: None) -> None:
    result = CliRunner().invoke(main, ["config", "--json"])
    assert result.exit_code == 0, result.output
    sections = {section["section"]: section for section in json.loads(result.output)}
    keys = {key["name"]: key for key in sections["plugin fsspec"]["keys"]}
    assert keys["plugin.fsspec.chunk.size"]["default"] == 4 * 1024 * 1024
    assert keys["plugin.fsspec.url"]["required"] is True
    assert keys["plugin.fsspec.encryption.keys"]["type"] == "password"
    assert keys["plugin.fsspec.storage.secret"]["type"] == "password"


def test_discovery_does_not_import_the_backends() -> None:
    """Every `tierlog` command discovers plugins: s3fs and friends must wait for configure."""
    code = (
        "import sys; from tierlog.plugins import make_plugin_manager; make_plugin_manager(); "
        "heavy = [m for m in ('fsspec', 's3fs', 'botocore', 'zstandard', 'cryptography') "
        "if m in sys.modules]; print(heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_hooks_before_configure_or_after_close_are_lifecycle_errors(
    target: Target, start_host: Callable[..., PluginHost]
) -> None:
    host = start_host(target)
    plugin = host.plugin_manager.get_plugin("fsspec")
    host.close()
    with pytest.raises(LifecycleError, match=r"not configured"):
        plugin.tierlog_fetch_index(remote_log_segment_metadata=None, index_type=None)
    assert "not configured" in repr(plugin)
