"""The conformance kit for tierlog plugins: the SPI's contracts as pytest base classes.

A storage or metadata plugin proves it keeps every promise of :mod:`tierlog.hookspecs` by
subclassing a contract in its own test suite and overriding a fixture or two::

    from tierlog.testing import StorageManagerContract

    class TestMyStorage(StorageManagerContract):
        supports_custom_metadata = True

        @pytest.fixture
        def storage_settings(self, tmp_path):
            return {"remote.log.storage.manager.name": "mine", "rsm.config.root": str(tmp_path)}

Failures name the hook and the rule broken. The helpers (real segment files, a recording
storage wrapper, a directory-backed reference storage plugin) are usable by any test.
"""

from .contract import ContractViolation
from .directory_storage import DirectoryStorageManager
from .metadata import MetadataManagerContract
from .recording import RecordingStorageManager, StorageEvent
from .runtime import MetadataRuntime
from .scenario import FAST_TIERING, Scenario, ScenarioError
from .segments import LocalSegment, build_segment
from .storage import StorageManagerContract
from .uploads import Uploads

__all__ = [
    "FAST_TIERING",
    "ContractViolation",
    "DirectoryStorageManager",
    "LocalSegment",
    "MetadataManagerContract",
    "MetadataRuntime",
    "RecordingStorageManager",
    "Scenario",
    "ScenarioError",
    "StorageEvent",
    "StorageManagerContract",
    "Uploads",
    "build_segment",
]
