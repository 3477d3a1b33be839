"""The transaction index (``.txnindex``) of a segment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tierlog.errors import KafkaStorageError
from tierlog.log.txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

# Four aborted transactions as a segment starting at offset 100 might hold them.
A = AbortedTxn(producer_id=7, first_offset=100, last_offset=120, last_stable_offset=121)
B = AbortedTxn(producer_id=8, first_offset=110, last_offset=130, last_stable_offset=125)
C = AbortedTxn(producer_id=9, first_offset=140, last_offset=160, last_stable_offset=150)
D = AbortedTxn(producer_id=7, first_offset=155, last_offset=180, last_stable_offset=170)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[TransactionIndex]:
    index = TransactionIndex(tmp_path / "00000000000000000100.txnindex", 100)
    yield index
    index.close()


def filled(index: TransactionIndex) -> TransactionIndex:
    for aborted in (A, B, C, D):
        index.append(aborted)
    return index


def test_entry_known_answer() -> None:
    entry = AbortedTxn(
        producer_id=0x0102030405060708, first_offset=5, last_offset=9, last_stable_offset=3
    )
    encoded = bytes.fromhex(
        "0000"  # version 0
        "0102030405060708"  # producerId
        "0000000000000005"  # firstOffset
        "0000000000000009"  # lastOffset
        "0000000000000003"  # lastStableOffset
    )
    assert entry.encode() == encoded
    assert AbortedTxn.decode(encoded) == entry
    assert AbortedTxn.decode(b"\xff" + encoded, 1) == entry


def test_decode_rejects_unknown_versions_and_short_entries() -> None:
    with pytest.raises(KafkaStorageError, match=r"unknown aborted transaction version 1 .* in f"):
        AbortedTxn.decode(b"\x00\x01" + A.encode()[2:], source="f")
    with pytest.raises(KafkaStorageError, match="truncated aborted transaction entry at byte 0"):
        AbortedTxn.decode(A.encode()[:33])


def test_no_file_until_the_first_append(index: TransactionIndex) -> None:
    assert not index.path.exists()
    assert index.is_empty()
    assert index.all_aborted() == []
    assert index.collect_aborted_txns(0, 1000) == TxnIndexSearchResult([], False)
    index.sanity_check()
    index.flush()
    index.truncate_to(0)
    index.reset()
    assert not index.path.exists()
    index.append(A)
    assert index.path.read_bytes() == A.encode()
    assert not index.is_empty()
    assert index.size_in_bytes() == 34


def test_last_offsets_must_increase(index: TransactionIndex) -> None:
    index.append(B)
    for stale in (A, AbortedTxn(1, 125, 130, 131)):
        with pytest.raises(ValueError, match="must increase"):
            index.append(stale)
    assert index.all_aborted() == [B]


def test_a_reopened_index_keeps_its_entries_and_order(index: TransactionIndex) -> None:
    filled(index).close()
    reopened = TransactionIndex(index.path, 100)
    assert reopened.all_aborted() == [A, B, C, D]
    assert reopened.last_offset == 180
    with pytest.raises(ValueError, match="must increase"):
        reopened.append(C)
    reopened.close()


@pytest.mark.parametrize(
    "fetch_offset,upper_bound,expected,complete",
    [
        (0, 1000, [A, B, C, D], False),  # no entry's LSO reaches the bound
        (100, 121, [A], True),  # A's LSO 121 reaches the bound: B need not be read
        (100, 122, [A, B], True),  # B's LSO 125 ends the search
        (121, 150, [B, C], True),  # A ended before the fetch; C's LSO 150 ends the search
        (131, 155, [C], True),  # D starts at the (exclusive) bound; its LSO ends the search
        (161, 175, [D], False),  # D's LSO 170 is below the bound: search the next segment
        (181, 200, [], False),
    ],
)
def test_collect_aborted_txns(
    index: TransactionIndex,
    fetch_offset: int,
    upper_bound: int,
    expected: list[AbortedTxn],
    complete: bool,
) -> None:
    result = filled(index).collect_aborted_txns(fetch_offset, upper_bound)
    assert result.aborted == expected
    assert result.is_complete is complete


def test_truncate_to(index: TransactionIndex) -> None:
    filled(index)
    index.truncate_to(181)
    assert index.all_aborted() == [A, B, C, D]
    index.truncate_to(180)
    assert index.all_aborted() == [A, B, C]
    assert index.path.stat().st_size == 3 * 34
    index.truncate_to(125)
    assert index.all_aborted() == [A]
    assert index.last_offset == 120
    index.append(AbortedTxn(3, 121, 122, 123))  # appending continues after the truncation point
    index.truncate_to(0)
    assert index.all_aborted() == []
    assert index.last_offset is None
    index.append(A)


def test_reset_empties_the_file(index: TransactionIndex) -> None:
    filled(index).reset()
    assert index.all_aborted() == []
    assert index.path.exists() and index.path.stat().st_size == 0
    index.append(A)
    assert index.all_aborted() == [A]


def test_sanity_check_rejects_a_partial_entry(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(A.encode() + B.encode()[:20])
    index = TransactionIndex(path, 100)  # opening a corrupt index does not fail...
    assert index.all_aborted() == [A]  # ...readers skip the partial tail, as Kafka's do...
    with pytest.raises(KafkaStorageError) as info:  # ...and recovery finds it
        index.sanity_check()
    assert str(path) in str(info.value) and "not a multiple of the 34-byte" in str(info.value)
    index.close()


def test_sanity_check_rejects_transactions_before_the_segment(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000200.txnindex"
    path.write_bytes(A.encode())
    index = TransactionIndex(path, 200)
    with pytest.raises(KafkaStorageError, match=r"below the index start offset 200") as info:
        index.sanity_check()
    assert str(path) in str(info.value)
    index.close()


def test_rename_to(index: TransactionIndex, tmp_path: Path) -> None:
    filled(index)
    target = tmp_path / "00000000000000000100.txnindex.deleted"
    index.rename_to(target)
    assert index.path == target
    assert not (tmp_path / "00000000000000000100.txnindex").exists()
    assert index.all_aborted() == [A, B, C, D]
    index.append(AbortedTxn(1, 190, 200, 201))
    with TransactionIndex(target, 100) as reopened:
        assert reopened.all_aborted()[-1].last_offset == 200


def test_rename_without_a_file_only_moves_the_name(index: TransactionIndex, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txnindex"
    index.rename_to(target)
    assert index.path == target and not target.exists()
    index.append(A)
    assert target.read_bytes() == A.encode()


def test_delete_if_exists(index: TransactionIndex) -> None:
    assert index.delete_if_exists() is False
    filled(index)
    assert index.delete_if_exists() is True
    assert not index.path.exists()
    assert index.all_aborted() == []
    index.append(A)  # a deleted index starts afresh
    assert index.all_aborted() == [A]


def test_flush_and_close(index: TransactionIndex) -> None:
    index.append(A)
    index.flush()
    index.close()
    assert index.all_aborted() == [A]  # reading reopens the file
