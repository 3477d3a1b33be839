"""An upload killed midway (a real SIGKILL of the uploading process) is never served, and
delete removes everything it left behind."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tierlog.errors import RemoteResourceNotFoundError
from tierlog.model import IndexType

from .conftest import HostFactory, Target, broker_mapping
from .segments import make_segment

REPOSITORY = Path(__file__).resolve().parents[2]

UPLOADER = """
import pickle, sys
from tests.core.recording import RecordingMetadata
from tierlog.config import BrokerConfig
from tierlog.host import PluginHost

with open(sys.argv[1], "rb") as job:
    mapping, metadata, data = pickle.load(job)
host = PluginHost.create(
    BrokerConfig.from_mapping(mapping), extra_plugins={"meta": RecordingMetadata("meta", [])}
)
host.start()
host.storage.copy_log_segment_data(metadata, data)
print("upload finished", flush=True)
"""


@pytest.mark.parametrize(
    "target", ["file", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
)
def test_an_upload_killed_midway_is_not_readable_and_delete_cleans_it(
    target: Target, make_host: HostFactory, tmp_path: Path
) -> None:
    segment = make_segment(tmp_path / "segment", size=64 * 1024)
    # The producer snapshot is a FIFO nobody writes to: the uploader blocks reading it after
    # the data and the other indexes are stored, and before the manifest, until it is killed.
    snapshot = segment.data.producer_snapshot_index
    snapshot.unlink()
    os.mkfifo(snapshot)
    job = tmp_path / "job.pickle"
    job.write_bytes(pickle.dumps((broker_mapping(target), segment.metadata, segment.data)))
    uploader = subprocess.Popen(
        [sys.executable, "-c", UPLOADER, str(job)],
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    base = segment.object_base(target.root).rsplit("/", 1)[1]
    written = {
        f"{base}.{kind}" for kind in ("log", "index", "timeindex", "leader-epoch-checkpoint")
    }
    try:
        deadline = time.monotonic() + 60
        while not written <= {name.rsplit("/", 1)[-1] for name in target.objects()}:
            assert uploader.poll() is None, uploader.communicate()
            assert time.monotonic() < deadline, "the uploader never got midway"
            time.sleep(0.02)
        time.sleep(0.2)
        assert uploader.poll() is None, "the upload should still be blocked before its manifest"
    finally:
        os.kill(uploader.pid, signal.SIGKILL)
        uploader.communicate()
    assert uploader.returncode == -signal.SIGKILL

    left = [name for name in target.objects() if segment.uuid in name]
    assert left and not [name for name in left if name.endswith(".rsm-manifest")]
    host = make_host()
    with pytest.raises(RemoteResourceNotFoundError, match=r"no manifest"):
        host.storage.fetch_log_segment(segment.metadata, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        host.storage.fetch_index(segment.metadata, IndexType.OFFSET)
    host.storage.delete_log_segment_data(segment.metadata)
    assert [name for name in target.objects() if segment.uuid in name] == []
