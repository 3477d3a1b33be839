"""The embedded cluster's metadata store: one JSON file in the controller's directory.

A single process runs the one controller, so there is nothing to elect: the directory lock
the embedded cluster holds keeps any other process out, and every save simply replaces the
whole file atomically (readers, and a restart after a crash, see the old or the new content).
The file name and format are those the controller always wrote, so existing data dirs load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from ..errors import KafkaStorageError
from ..log.checkpoint import write_atomically
from ..model import Uuid
from ..server.image import TopicImage
from ..server.producer_ids import MAX_PRODUCER_ID
from .store import ClusterState, MetadataStore, check_cluster_id, unreadable_reason

METADATA_FILE = "cluster-metadata.json"
_FORMAT_VERSION = 1


class FileMetadataStore(MetadataStore):
    """The cluster state in ``directory / cluster-metadata.json``; one writer per directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / METADATA_FILE
        self._claimed: ClusterState | None = None
        self._closed = False

    def claim(self, controller_id: int, *, cluster_id: str | None = None) -> ClusterState:
        self._check_open()
        stored = self._read()
        if stored is None:
            stored = ClusterState.new(cluster_id or str(Uuid.random()))
        check_cluster_id(cluster_id, stored.cluster_id, str(self.path))
        claimed = attrs.evolve(stored, controller_epoch=stored.controller_epoch + 1)
        self._write(claimed)
        self._claimed = claimed
        return claimed

    def save(self, state: ClusterState) -> None:
        self._check_open()
        if self._claimed is None:
            raise RuntimeError(f"{self.path}: save before claim")
        if (state.cluster_id, state.controller_epoch) != (
            self._claimed.cluster_id,
            self._claimed.controller_epoch,
        ):
            raise ValueError(
                f"{self.path}: state of cluster {state.cluster_id!r} at controller epoch "
                f"{state.controller_epoch}, but {self._claimed.cluster_id!r} at epoch "
                f"{self._claimed.controller_epoch} was claimed"
            )
        self._write(state)

    def resign(self) -> None:
        """Nothing to give up: the directory lock, not the file, keeps other writers out."""

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the metadata store of {self.directory} is closed")

    def _read(self) -> ClusterState | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise KafkaStorageError(f"cannot read {self.path}: {err.strerror or err}") from err
        try:
            data = json.loads(raw)
            version = data.get("version")
        except (ValueError, RecursionError, AttributeError) as err:
            raise KafkaStorageError(
                f"{self.path} is not valid cluster metadata: {unreadable_reason(err)}"
            ) from None
        if version != _FORMAT_VERSION:
            raise KafkaStorageError(f"{self.path}: unknown metadata format {version}")
        try:
            return _state_from_json(data)
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as err:
            raise KafkaStorageError(
                f"{self.path} is not valid cluster metadata: {unreadable_reason(err)}"
            ) from None

    def _write(self, state: ClusterState) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise KafkaStorageError(f"cannot create {self.directory}: {err}") from err
        data = json.dumps(_state_to_json(state), indent=1, sort_keys=True).encode()
        write_atomically(self.path, data)


def _state_to_json(state: ClusterState) -> dict[str, Any]:
    return {
        "version": _FORMAT_VERSION,
        "cluster_id": state.cluster_id,
        "controller_epoch": state.controller_epoch,
        "topics": {name: topic.to_json() for name, topic in sorted(state.topics.items())},
        "broker_configs": {k: dict(v) for k, v in state.broker_configs.items()},
        "next_producer_id": state.next_producer_id,
    }


def _state_from_json(data: dict[str, Any]) -> ClusterState:
    # Files written before producer ids were allocated have no key.
    next_producer_id = int(data.get("next_producer_id", 0))
    if not 0 <= next_producer_id <= MAX_PRODUCER_ID + 1:
        raise ValueError(f"next_producer_id {next_producer_id} is out of range")
    return ClusterState(
        cluster_id=str(data["cluster_id"]),
        controller_epoch=int(data["controller_epoch"]),
        topics={
            name: TopicImage.from_json(name, topic_data)
            for name, topic_data in data["topics"].items()
        },
        broker_configs={
            str(k): {str(n): str(v) for n, v in values.items()}
            for k, values in data.get("broker_configs", {}).items()
        },
        next_producer_id=next_producer_id,
    )
