"""The error hierarchy: retriable flags, Kafka codes, builtin bases."""

from __future__ import annotations

import pytest
from tierlog import errors


def test_remote_storage_not_ready_is_retriable_beside_replica_not_available() -> None:
    not_ready = errors.RemoteStorageNotReadyError("partition p-0 metadata is loading")
    assert not_ready.retriable
    assert isinstance(not_ready, errors.RetriableError)
    assert not isinstance(not_ready, errors.ReplicaNotAvailableError)
    assert errors.RemoteStorageNotReadyError.code is None  # Kafka never gave it a wire code
    assert (
        errors.RemoteStorageNotReadyError.wire_fallback_code
        == errors.ReplicaNotAvailableError.code
        == 9
    )


def test_remote_storage_not_ready_belongs_to_the_remote_storage_errors() -> None:
    """As Kafka's RemoteStorageNotReadyException: code that catches storage errors catches it."""
    with pytest.raises(errors.RemoteStorageError) as caught:
        raise errors.RemoteStorageNotReadyError("partition p-0 metadata is loading")
    assert isinstance(caught.value, errors.RetriableRemoteStorageError)
    assert not isinstance(caught.value, errors.RemoteResourceNotFoundError)


@pytest.mark.parametrize(
    "cls,code,retriable",
    [
        (errors.OffsetOutOfRangeError, 1, False),
        (errors.CorruptRecordError, 2, True),
        (errors.NotLeaderOrFollowerError, 6, True),
        (errors.InvalidConfigError, 40, False),
        (errors.KafkaStorageError, 56, True),
        (errors.FencedLeaderEpochError, 74, True),
        (errors.OffsetMovedToTieredStorageError, 109, False),
    ],
)
def test_kafka_codes_and_retriability(
    cls: type[errors.TierlogError], code: int, retriable: bool
) -> None:
    assert cls.code == code
    assert cls.retriable is retriable
    assert errors.error_for_code(code) is cls


def test_unknown_codes_map_to_unknown_server_error() -> None:
    assert errors.error_for_code(9999) is errors.UnknownServerError


def test_remote_errors_keep_builtin_bases() -> None:
    with pytest.raises(FileNotFoundError):
        raise errors.RemoteResourceNotFoundError("gone")
    assert issubclass(errors.RetriableRemoteStorageError, errors.RemoteStorageError)
    assert errors.RetriableRemoteStorageError.retriable
    assert not errors.RemoteStorageError.retriable
    assert issubclass(errors.InvalidConfigError, ValueError)
    assert issubclass(errors.BackendNotFoundError, LookupError)


def test_corrupt_record_error_says_where_and_why() -> None:
    err = errors.CorruptRecordError("bad CRC", position=183)
    assert str(err) == "corrupt record batch at byte 183: bad CRC"
    assert (err.reason, err.position) == ("bad CRC", 183)


def test_plugin_errors_name_the_plugin() -> None:
    load = errors.PluginLoadError("acme", "acme-dist", ImportError("no module x"))
    assert "'acme'" in str(load) and "'acme-dist'" in str(load) and isinstance(load, ImportError)
    call = errors.PluginCallError("acme", "configure", KeyError("url"))
    assert str(call) == "plugin 'acme' failed in configure: KeyError: 'url'"


def test_error_code_of_answers_unknown_server_error_for_anything_unplanned() -> None:
    assert errors.error_code_of(errors.NotLeaderOrFollowerError("moved")) == 6
    assert errors.error_code_of(errors.RemoteStorageError("no code")) == -1
    assert errors.error_code_of(KeyError("bug")) == errors.UnknownServerError.code
