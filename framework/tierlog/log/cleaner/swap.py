"""Putting a cleaned segment in place of the segments it was cleaned from, so that a crash at any
moment leaves either the old segments or the cleaned one, never both and never neither.

Kafka's ``replaceSegments``, step by step:

1. the cleaned segment is written as ``<base>.log.cleaned`` (and ``.index.cleaned``...), flushed;
2. its files are renamed to ``.swap``, the ``.log`` last: that rename commits the clean;
3. under the log's lock, each old segment's files are renamed to ``.deleted`` (indexes first),
   then the cleaned segment's ``.swap`` files to their live names (indexes first), and the
   segment list changes.

At load, ``complete_swaps`` finishes step 3 for any ``.log.swap`` left by a crash, before
``.cleaned``, ``.deleted`` and stray ``.swap`` files are removed as leftovers: a crash before
step 2 loses only the cleaning work, a crash after it loses nothing of the cleaned segment.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...records import HEADER_SIZE
from .. import files
from ..checkpoint import fsync_directory
from ..segment import LogSegment

if TYPE_CHECKING:
    from ..partition_log import PartitionLog

log = logging.getLogger(__name__)

_INDEX_SUFFIXES = (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)
#: base offset, batch length, (partition leader epoch, magic, crc, attributes), last offset delta
_OFFSETS = struct.Struct(">qi")
_DELTA = struct.Struct(">i")

#: Called at each step of a swap with the step's name; tests stop a swap there to act a crash.
StepHook = Callable[[str], None]


def _no_hook(step: str) -> None:
    pass


def commit_cleaned(cleaned: LogSegment, hook: StepHook = _no_hook) -> None:
    """Step 2: the flushed ``.cleaned`` segment becomes ``.swap`` (the ``.log`` last)."""
    hook("before-swap-rename")
    cleaned.replace_suffix(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    fsync_directory(cleaned.log_path.parent)
    hook("after-swap-rename")


def replace_segments(
    plog: PartitionLog,
    cleaned: LogSegment,
    old: Sequence[LogSegment],
    hook: StepHook = _no_hook,
) -> bool:
    """Step 3: puts the committed ``cleaned`` segment in place of ``old`` in ``plog``.

    False (and the cleaned files deleted) when ``old`` is no longer the run of segments the log
    holds there: retention or a truncation removed some meanwhile, and the clean is dropped.
    """
    with plog._lock:
        segments = plog._segments
        try:
            start = next(i for i, s in enumerate(segments) if s is old[0])
        except StopIteration:
            start = -1
        if (
            start < 0
            or plog._closed
            or start + len(old) >= len(segments)  # the active segment is never replaced
            or any(segments[start + i] is not s for i, s in enumerate(old))
        ):
            cleaned.delete()
            return False
        now = plog._clock()
        for segment in old:
            plog._forget(segment)
            segment.replace_suffix("", files.DELETED_SUFFIX)
            hook(f"after-delete-rename-{segment.base_offset}")
        cleaned.replace_suffix(files.SWAP_SUFFIX, "")
        fsync_directory(plog._dir)
        hook("after-live-rename")
        segments[start : start + len(old)] = [cleaned]
        plog._bases[start : start + len(old)] = [cleaned.base_offset]
        plog._bound_cache = None
        plog._touch(cleaned)
        delay = plog._config.file_delete_delay_ms
        for segment in old:
            if delay <= 0:
                segment.delete()
            else:
                plog._pending_deletes.append((now + delay, segment))
        return True


def complete_swaps(directory: Path) -> int:
    """Finishes every swap a crash interrupted after its commit; returns how many.

    A swap replaces the segment of its own base, so a ``<base>.log.swap`` with no
    ``<base>.log`` (or ``.log.deleted``, once step 3 began) is not one, and is removed with the
    other leftovers. The live segments a swap replaces are those from ``base`` up to the swap
    segment's next offset (at least ``base`` itself); their files are deleted, except the live
    indexes of ``base`` once its old ``.log`` is gone (step 3 renamed the old indexes away
    before the log, so those are the cleaned segment's own), then the ``.swap`` files take
    their live names.
    """
    swaps = sorted(
        files.offset_from_file_name(p.name)
        for p in directory.iterdir()
        if p.name.endswith(files.LOG_SUFFIX + files.SWAP_SUFFIX)
        and files.is_segment_file(p.name[: -len(files.SWAP_SUFFIX)], files.LOG_SUFFIX)
    )
    done = 0
    for base in swaps:
        swap_log = files.segment_file(directory, base, files.LOG_SUFFIX + files.SWAP_SUFFIX)
        replaced = files.segment_file(directory, base, files.LOG_SUFFIX)
        if not (
            replaced.exists() or replaced.with_name(replaced.name + files.DELETED_SUFFIX).exists()
        ):
            # No segment of that base to replace, as there always is: not a cleaner's swap.
            log.warning("ignoring %s, which replaces no segment", swap_log)
            continue
        upper = max(_next_offset(swap_log, base), base + 1)
        live = sorted(
            files.offset_from_file_name(p.name)
            for p in directory.iterdir()
            if files.is_segment_file(p.name, files.LOG_SUFFIX)
        )
        for other in live:
            if base <= other < upper:
                files.segment_file(directory, other, files.LOG_SUFFIX).unlink()
                for suffix in _INDEX_SUFFIXES:
                    files.segment_file(directory, other, suffix).unlink(missing_ok=True)
        for suffix in _INDEX_SUFFIXES:
            swap = files.segment_file(directory, base, suffix + files.SWAP_SUFFIX)
            if swap.exists():
                os.replace(swap, files.segment_file(directory, base, suffix))
        os.replace(swap_log, files.segment_file(directory, base, files.LOG_SUFFIX))
        log.info("completed the interrupted swap of the cleaned segment %s", swap_log)
        done += 1
    if done:
        fsync_directory(directory)
    return done


def _next_offset(path: Path, base: int) -> int:
    """The offset after the last whole batch of a segment file (``base`` when it has none)."""
    next_offset = base
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        position = 0
        while position + HEADER_SIZE <= size:
            head = os.pread(file.fileno(), HEADER_SIZE, position)
            batch_base, length = _OFFSETS.unpack_from(head)
            end = position + 12 + length
            if length < HEADER_SIZE - 12 or end > size:
                break
            next_offset = batch_base + _DELTA.unpack_from(head, 23)[0] + 1
            position = end
    return next_offset
