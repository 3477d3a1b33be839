"""The copy slot across processes: one holder at a time, and none after its holder died."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tierlog.remote.copy_slot import NOTE_FILE_NAME, CopySlot, HandBack

HOLDER = """
import sys, time
from pathlib import Path
from tierlog.remote.copy_slot import CopySlot
slot = CopySlot.try_acquire(Path(sys.argv[1]))
print("held" if slot else "busy", flush=True)
time.sleep(600)
"""


def test_one_holder_at_a_time_and_the_slot_is_free_again_on_release(tmp_path: Path) -> None:
    first = CopySlot.try_acquire(tmp_path)
    assert first is not None
    assert CopySlot.try_acquire(tmp_path) is None, "a second open file is a second holder"
    assert CopySlot.acquire(tmp_path, 0.1) is None
    first.release()
    first.release()
    again = CopySlot.try_acquire(tmp_path)
    assert again is not None and again.held
    again.release()


def test_a_killed_holder_leaves_the_slot_free(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert CopySlot.try_acquire(tmp_path) is None
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    slot = CopySlot.try_acquire(tmp_path)
    assert slot is not None
    slot.release()


def test_the_hand_back_note_says_how_far_the_metadata_must_show_tiering(tmp_path: Path) -> None:
    assert HandBack.read(tmp_path) is None
    HandBack(7, 41).write(tmp_path)
    assert HandBack.read(tmp_path) == HandBack(7, 41) and HandBack(7, 41).must_reach == 41
    HandBack(7, 41, finishing_end=63).write(tmp_path)
    assert HandBack.read(tmp_path) == HandBack(7, 41, 63)
    assert HandBack(7, 41, 63).must_reach == 63, "the FINISHED under way may have been sent"
    (tmp_path / NOTE_FILE_NAME).write_text("not json")
    assert HandBack.read(tmp_path) == HandBack(-1, -1), "a foreign file waits for nothing"
    HandBack.clear(tmp_path)
    assert HandBack.read(tmp_path) is None
