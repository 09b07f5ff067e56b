"""Opening a directory after a crash in the middle of a compaction swap: roll back while a
.cleaned file remains, complete once only .swap files remain."""

from __future__ import annotations

import os

from spark_log.storage.filesystem import DEFAULT_FS
from spark_log.storage.log.swap_recovery import recover_interrupted_swaps

from ..batches import make_batch


def name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def segment(directory: str, base: int, offsets: list[int], suffix: str = "",
            parts: tuple[str, ...] = (".log", ".index", ".timeindex")) -> None:
    """Segment files at `base` (one one-record batch per offset in the .log)."""
    for part in parts:
        with open(os.path.join(directory, name(base, part + suffix)), "wb") as f:
            if part == ".log":
                f.write(b"".join(make_batch(1, base_offset=o) for o in offsets))


def recover(directory: str) -> tuple[bool, list[str]]:
    changed = recover_interrupted_swaps(directory, os.listdir(directory), DEFAULT_FS)
    return changed, sorted(os.listdir(directory))


def files(*names: str) -> list[str]:
    return sorted(names)


def test_nothing_to_do_without_cleaned_or_swap_files(tmp_path) -> None:  # type: ignore
    segment(str(tmp_path), 0, [0, 1])
    assert recover(str(tmp_path)) == (False, files(name(0, ".log"), name(0, ".index"),
                                                    name(0, ".timeindex")))


def test_a_swap_not_fully_prepared_is_rolled_back(tmp_path) -> None:  # type: ignore
    d = str(tmp_path)
    segment(d, 0, [0, 1, 2])
    segment(d, 3, [3, 4])
    segment(d, 0, [2], ".swap", parts=(".log",))  # renamed before the crash
    segment(d, 0, [2], ".cleaned", parts=(".index", ".timeindex"))  # not yet
    changed, names = recover(d)
    assert changed
    assert names == files(*(name(b, p) for b in (0, 3) for p in (".log", ".index",
                                                                  ".timeindex")))
    with open(os.path.join(d, name(0, ".log")), "rb") as f:
        assert len(f.read()) == 3 * len(make_batch(1))  # the old segment, untouched


def test_a_prepared_swap_replaces_the_segments_it_covers(tmp_path) -> None:  # type: ignore
    d = str(tmp_path)
    segment(d, 0, [0, 1, 2])
    segment(d, 3, [3, 4])
    segment(d, 5, [5, 6])  # after the cleaned group: stays
    segment(d, 0, [2, 4], ".swap")
    with open(os.path.join(d, name(0, ".log.deleted")), "wb"):
        pass  # a .deleted file is the loader's to remove, not this step's
    changed, names = recover(d)
    assert changed
    assert names == files(name(0, ".log"), name(0, ".index"), name(0, ".timeindex"),
                          name(0, ".log.deleted"), name(5, ".log"), name(5, ".index"),
                          name(5, ".timeindex"))
    with open(os.path.join(d, name(0, ".log")), "rb") as f:
        assert f.read() == make_batch(1, base_offset=2) + make_batch(1, base_offset=4)


def test_an_empty_swap_still_replaces_the_segment_at_its_base(tmp_path) -> None:  # type: ignore
    d = str(tmp_path)
    segment(d, 0, [0, 1])
    segment(d, 2, [2, 3])
    segment(d, 0, [], ".swap")
    _, names = recover(d)
    assert name(0, ".log") in names and name(2, ".log") in names
    assert os.path.getsize(os.path.join(d, name(0, ".log"))) == 0


def test_index_swaps_left_after_the_log_was_renamed_are_completed(tmp_path) -> None:  # type: ignore
    d = str(tmp_path)
    segment(d, 0, [1], parts=(".log",))  # the new .log, already renamed
    segment(d, 0, [1], ".swap", parts=(".index", ".timeindex"))
    segment(d, 2, [2, 3])
    changed, names = recover(d)
    assert changed
    assert names == files(*(name(b, p) for b in (0, 2) for p in (".log", ".index",
                                                                  ".timeindex")))
    with open(os.path.join(d, name(0, ".log")), "rb") as f:
        assert f.read() == make_batch(1, base_offset=1)
