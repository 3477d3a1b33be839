"""The one-pass local copy behind file:// uploads: same bytes, per-chunk checksums, clear errors."""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Iterator
from pathlib import Path

import crc32c
import pytest
from tierlog.errors import RemoteStorageError
from tierlog_fsspec.localcopy import BUFFER_BYTES, copy_checksummed

pytestmark = pytest.mark.skipif(not hasattr(os, "preadv"), reason="needs positional I/O")


@pytest.fixture
def executor() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        yield pool


@pytest.mark.parametrize(
    ("size", "chunk_size"),
    [
        (0, 4096),
        (1, 4096),
        (4096, 4096),
        (3 * BUFFER_BYTES + 17, BUFFER_BYTES),  # several lanes, a short last chunk
        (2 * BUFFER_BYTES + 5, 3 * BUFFER_BYTES),  # one chunk larger than the buffer
        (100_000, 4096),  # many chunks per lane
    ],
)
def test_the_copy_is_exact_and_each_chunk_checksummed(
    tmp_path: Path,
    executor: concurrent.futures.Executor,
    size: int,
    chunk_size: int,
) -> None:
    data = os.urandom(size)
    source, target = tmp_path / "segment.log", tmp_path / "remote" / "segment.log"
    source.write_bytes(data)
    target.parent.mkdir()
    target.write_bytes(b"old contents, longer than some of the new ones" * 100)

    checksums = copy_checksummed(str(source), str(target), size, chunk_size, executor, "t-0")

    assert target.read_bytes() == data
    expected = [crc32c.crc32c(data[s : s + chunk_size]) for s in range(0, size, chunk_size)]
    assert checksums == expected


def test_a_missing_source_is_a_storage_error_naming_it(
    tmp_path: Path, executor: concurrent.futures.Executor
) -> None:
    missing = tmp_path / "gone.log"
    with pytest.raises(RemoteStorageError, match=r"t-0: cannot read the local file .*gone\.log"):
        copy_checksummed(str(missing), str(tmp_path / "out"), 10, 4096, executor, "t-0")


def test_a_source_that_shrank_is_a_storage_error(
    tmp_path: Path, executor: concurrent.futures.Executor
) -> None:
    source = tmp_path / "segment.log"
    source.write_bytes(os.urandom(5000))
    with pytest.raises(RemoteStorageError, match="shrank while uploading"):
        copy_checksummed(str(source), str(tmp_path / "out"), 9000, 4096, executor, "t-0")


def test_a_target_that_cannot_be_written_raises_the_os_error_for_the_backend(
    tmp_path: Path, executor: concurrent.futures.Executor
) -> None:
    source = tmp_path / "segment.log"
    source.write_bytes(b"x" * 10)
    with pytest.raises(OSError) as raised:
        copy_checksummed(
            str(source), str(tmp_path / "no" / "such" / "dir"), 10, 4096, executor, "t"
        )
    assert not isinstance(raised.value, RemoteStorageError)
