"""Configuration files that cannot be used: one line naming the file and the problem, exit 2.

Whatever is wrong with the file (missing, a directory, unreadable, not UTF-8, not valid TOML or
``.properties``, nested a thousand deep, binary garbage), ``tierlog config --check`` and
``tierlog run --config`` print one ``error:`` line on stderr and exit 2, without a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from tierlog.cli import main
from tierlog.config import BrokerConfig, read_file
from tierlog.errors import ConfigFileError

#: Bytes that are no text in any encoding a configuration file is written in.
GARBAGE = bytes(range(256)) * 4 + b"\xff\xfe\x00\x01" * 64


def _write(name: str, data: bytes | str) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        path = tmp_path / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
        return path

    return make


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "server.toml"
    path.mkdir()
    return path


def _under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain" / "server.toml"


#: name -> (how to make the file, what the one line must say about it)
CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing": (lambda tmp_path: tmp_path / "absent.toml", "does not exist"),
    "a directory": (_directory, "is a directory"),
    "under a file": (_under_a_file, "does not exist"),
    "latin-1 toml": (
        _write("server.toml", b'cluster.id = "caf\xe9"\n'),
        "is not UTF-8 text (byte 0xe9 at line 1, column 18)",
    ),
    "latin-1 properties": (
        _write("server.properties", b"num.partitions=2\ncluster.id=caf\xe9\n"),
        "is not UTF-8 text (byte 0xe9 at line 2, column 15)",
    ),
    "invalid toml": (_write("server.toml", "num.partitions = = 3\n"), "invalid TOML"),
    "arrays 1000 deep": (
        _write("server.toml", "log.dirs = " + "[" * 1000 + "]" * 1000 + "\n"),
        "nested too deep",
    ),
    "inline tables 1000 deep": (
        _write("server.toml", "a = " + "{b = " * 1000 + "1" + "}" * 1000 + "\n"),
        "nested too deep",
    ),
    "tables 1000 deep": (
        _write("server.toml", "[" + ".".join(["t"] * 1000) + "]\nx = 1\n"),
        "nested more than 32 deep",
    ),
    "invalid properties": (
        _write("server.properties", "rsm.config.storage.secret=\\u12\n"),
        "invalid properties file: malformed \\uXXXX escape at line 1",
    ),
    "garbage toml": (_write("server.toml", GARBAGE), "is not UTF-8 text"),
    "garbage properties": (_write("server.properties", GARBAGE), "is not UTF-8 text"),
    "binary that is valid UTF-8": (
        _write("server.properties", b"num.partitions=2\n\x00\x01\x02=\x03\n"),
        "is not a text file (control character U+0000 at line 2, column 1)",
    ),
    "wrong suffix": (_write("server.yaml", "num.partitions: 2\n"), "use .toml or .properties"),
}


def _cli(*args: str) -> tuple[int, str, str, BaseException | None]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr, result.exception


def _assert_one_clear_line(code: int, err: str, path: Path, problem: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}: "), err
    assert lines[0].count(str(path)) == 1, err
    assert problem in lines[0], err


@pytest.mark.parametrize("case", list(CASES))
def test_config_check_of_an_unusable_file_is_one_line(tmp_path: Path, case: str) -> None:
    make, problem = CASES[case]
    path = make(tmp_path)
    code, out, err, exception = _cli("config", "--check", str(path))
    assert isinstance(exception, SystemExit), exception
    assert "OK" not in out
    _assert_one_clear_line(code, err, path, problem)


@pytest.mark.parametrize("case", list(CASES))
def test_run_with_an_unusable_file_is_one_line(tmp_path: Path, case: str) -> None:
    make, problem = CASES[case]
    path = make(tmp_path)
    data_dir = tmp_path / "data"
    code, _out, err, exception = _cli("run", "--config", str(path), "--data-dir", str(data_dir))
    assert isinstance(exception, SystemExit), exception
    _assert_one_clear_line(code, err, path, problem)
    assert not data_dir.exists()


@pytest.mark.parametrize("case", list(CASES))
def test_reading_an_unusable_file_raises_a_config_file_error(tmp_path: Path, case: str) -> None:
    make, problem = CASES[case]
    path = make(tmp_path)
    with pytest.raises(ConfigFileError) as caught:
        BrokerConfig.from_file(path)
    assert caught.value.path == str(path)
    assert problem in str(caught.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_a_file_without_read_permission(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text("num.partitions = 2\n")
    path.chmod(0)
    code, _out, err, _ = _cli("config", "--check", str(path))
    _assert_one_clear_line(code, err, path, "permission denied")


def test_a_byte_order_mark_is_not_part_of_the_first_key(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(b"\xef\xbb\xbfnum.partitions=3\n")
    assert read_file(path) == {"num.partitions": "3"}


def test_a_bad_escape_never_quotes_the_value(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("rsm.config.storage.secret=\\u12zzSECRETPART\n")
    with pytest.raises(ConfigFileError) as caught:
        read_file(path)
    assert "12zz" not in str(caught.value) and "SECRETPART" not in str(caught.value)


def test_a_real_process_on_a_toml_file_1000_deep(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text("log.dirs = " + "[" * 1000 + "]" * 1000 + "\n")
    for args in (["config", "--check", str(path)], ["run", "--config", str(path)]):
        done = subprocess.run(
            [sys.executable, "-m", "tierlog", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == [f"error: {path}: invalid TOML: values nested too deep"]
