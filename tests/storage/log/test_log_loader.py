"""Opening a partition directory: leftovers, index repair and crash recovery."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from spark_log.storage.filesystem import DEFAULT_FS
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.log_loader import LoadedLog, load_segments
from spark_log.storage.log.segment import Segment

from ..batches import make_batch
from ..conftest import CountingFileSystem, open_log, small_config


def write_log(tmp_path, clock, batches: int = 60, close: bool = True,  # type: ignore
              config: LogConfig | None = None) -> str:
    """A log with several segments; returns the partition directory."""
    log = open_log(tmp_path, config or small_config(), clock)
    for i in range(batches):
        log.append(make_batch(2, timestamp=clock.now_ms() + i, value_size=60), leader_epoch=1)
    if close:
        log.close()
    else:
        log.release()  # a crash: nothing trimmed, nothing flushed by us
    return log.dir


def load(directory: str, clock, recovery_point: int = 0, clean: bool = False,  # type: ignore
         fs=DEFAULT_FS, epochs: list | None = None) -> LoadedLog:  # type: ignore[type-arg]
    return load_segments(directory, small_config(), clock=clock, fs=fs,
                         recovery_point=recovery_point, log_start_offset=0,
                         had_clean_shutdown=clean,
                         on_batch=(epochs.append if epochs is not None else lambda h: None))


def names(directory: str) -> list[str]:
    return sorted(os.listdir(directory))


def test_clean_open_reads_only_the_active_segments_offset_index(tmp_path, clock) -> None:  # type: ignore
    d = write_log(tmp_path, clock)
    fs = CountingFileSystem()
    loaded = load(d, clock, clean=True, fs=fs)
    assert len(loaded.segments) == 3 and loaded.next_offset == 120 and not loaded.recovered
    # the active segment's tail is checked, which gives the end offset; nothing else is read
    assert fs.opened[".index"] == 1 and fs.opened[".timeindex"] == 0


def test_garbage_after_a_clean_shutdown_is_found_and_truncated(tmp_path, clock, caplog  # type: ignore
                                                               ) -> None:
    d = write_log(tmp_path, clock)
    active = os.path.join(d, [n for n in names(d) if n.endswith(".log")][-1])
    size = os.path.getsize(active)
    with open(active, "ab") as f:
        f.write(b"garbage" * 10)
    with caplog.at_level(logging.WARNING):
        loaded = load(d, clock, clean=True)
    assert loaded.recovered and loaded.next_offset == 120
    assert f"{active} is damaged at byte {size}" in caplog.text
    assert "dropped anything from offset 120 on (70 bytes); nothing kept" in caplog.text
    assert os.path.getsize(active) == size


@pytest.mark.parametrize("batches", [1, 60])  # an active segment without index entries, with
def test_a_damaged_first_batch_of_the_active_segment_is_found_at_a_clean_start(  # type: ignore
        tmp_path, clock, caplog, batches: int) -> None:
    d = write_log(tmp_path, clock, batches=batches)
    active = os.path.join(d, [n for n in names(d) if n.endswith(".log")][-1])
    with open(active, "r+b") as f:  # a bit flipped in the first batch's records (CRC-covered)
        f.seek(70)
        byte = f.read(1)[0]
        f.seek(70)
        f.write(bytes([byte ^ 0x01]))
    with caplog.at_level(logging.WARNING):
        loaded = load(d, clock, clean=True)
    base = int(os.path.basename(active).split(".")[0])
    assert loaded.recovered and loaded.next_offset == base
    assert f"{active} is damaged at byte 0" in caplog.text and "CRC mismatch" in caplog.text


def test_garbage_after_the_active_segment_is_truncated(tmp_path, clock, caplog) -> None:  # type: ignore
    d = write_log(tmp_path, clock, close=False)
    active = os.path.join(d, [n for n in names(d) if n.endswith(".log")][-1])
    size = os.path.getsize(active)
    with open(active, "ab") as f:
        f.write(os.urandom(333))
    with caplog.at_level(logging.WARNING):
        loaded = load(d, clock, recovery_point=10**6)
    assert f"{active} is damaged at byte {size}" in caplog.text
    assert "dropped anything from offset 120 on (333 bytes)" in caplog.text
    assert os.path.getsize(active) == size and loaded.next_offset == 120


def test_a_truncated_segment_loses_only_its_torn_batch(tmp_path, clock, caplog) -> None:  # type: ignore
    d = write_log(tmp_path, clock, close=False)
    active = [n for n in names(d) if n.endswith(".log")][-1]
    path = os.path.join(d, active)
    os.truncate(path, os.path.getsize(path) - 10)  # tear the last batch
    with caplog.at_level(logging.WARNING):
        loaded = load(d, clock)
    assert f"{active} is damaged" in caplog.text and "runs past the end" in caplog.text
    assert "nothing kept (a torn write, not a batch)" in caplog.text
    assert loaded.next_offset == 118  # the torn batch (118, 119) is gone, the rest stays


def test_corruption_in_an_older_segment_drops_the_segments_after_it(tmp_path, clock, caplog  # type: ignore
                                                                     ) -> None:
    d = write_log(tmp_path, clock, close=False)
    logs = [n for n in names(d) if n.endswith(".log")]
    second = os.path.join(d, logs[1])
    with open(second, "r+b") as f:
        f.seek(500)
        f.write(b"\xff" * 8)
    with caplog.at_level(logging.WARNING):
        loaded = load(d, clock)
    assert len(loaded.segments) == 2
    later = logs[2:]
    assert f"{second} is damaged at byte 398 (batch at byte 398 (offsets 44 to 45): CRC mismatch" \
        in caplog.text
    assert "dropped offsets 44 to 119" in caplog.text
    assert f", and {len(later)} later segment(s) of " in caplog.text
    kept = sorted(n for n in names(d) if ".damaged-" in n)
    # the bad batch onwards and every later segment are kept aside, not deleted
    assert [n[:20] for n in kept] == [logs[1][:20], *(n[:20] for n in later)]
    assert all(n in caplog.text for n in kept)
    assert [n for n in names(d) if n.endswith(".log") and ".damaged-" not in n] == logs[:2]
    assert not any(n.startswith(logs[2][:20]) and n.endswith("index") for n in names(d))


def test_only_segments_from_the_recovery_point_on_are_scanned(tmp_path, clock) -> None:  # type: ignore
    d = write_log(tmp_path, clock, close=False)
    logs = [n for n in names(d) if n.endswith(".log")]
    first = os.path.join(d, logs[0])
    with open(first, "r+b") as f:  # damage below the recovery point goes unnoticed...
        f.seek(500)
        f.write(b"\xff" * 8)
    size = os.path.getsize(first)
    active_base = int(logs[-1][:20])
    epochs: list = []  # type: ignore[type-arg]
    loaded = load(d, clock, recovery_point=active_base, epochs=epochs)
    assert os.path.getsize(first) == size and len(loaded.segments) == len(logs)
    assert epochs[0].base_offset == active_base  # ...only the active segment was walked


def test_deleted_index_is_rebuilt_on_open(tmp_path, clock, caplog) -> None:  # type: ignore
    d = write_log(tmp_path, clock)
    index = os.path.join(d, "00000000000000000000.index")
    expected = Path(index).read_bytes()
    os.remove(index)
    with caplog.at_level(logging.WARNING):
        load(d, clock, clean=True)
    assert f"index file {index} is missing; rebuilding the indexes" in caplog.text
    assert Path(index).read_bytes() == expected


def test_torn_index_is_rebuilt_on_open(tmp_path, clock, caplog) -> None:  # type: ignore
    d = write_log(tmp_path, clock)
    index = os.path.join(d, "00000000000000000000.timeindex")
    expected = Path(index).read_bytes()
    os.truncate(index, len(expected) - 5)
    with caplog.at_level(logging.WARNING):
        load(d, clock, clean=True)
    assert "not a multiple of the entry size 12" in caplog.text
    assert Path(index).read_bytes() == expected


def test_index_with_wrong_entries_is_rebuilt_on_first_use(tmp_path, clock, caplog) -> None:  # type: ignore
    d = write_log(tmp_path, clock)
    index = os.path.join(d, "00000000000000000000.index")
    expected = Path(index).read_bytes()
    with open(index, "r+b") as f:
        f.write(b"\x00\x00\x00\x09\x7f\x00\x00\x00")  # a position far past the log's end
    first: Segment = load(d, clock, clean=True).segments[0]
    with caplog.at_level(logging.WARNING):
        assert first.translate_offset(5) is not None
    assert "corrupt offset index" in caplog.text and "rebuilding" in caplog.text
    first.close()
    assert Path(index).read_bytes() == expected


def test_leftovers_and_orphan_indexes_are_removed(tmp_path, clock, caplog) -> None:  # type: ignore
    d = write_log(tmp_path, clock, batches=5)
    for name in ("00000000000000000000.log.deleted", "00000000000000000099.index",
                 "00000000000000000099.timeindex", "00000000000000000000.log.cleaned",
                 "leader-epoch-checkpoint.tmp"):
        open(os.path.join(d, name), "wb").close()
    with caplog.at_level(logging.INFO):
        load(d, clock, clean=True)
    assert names(d) == ["00000000000000000000.index", "00000000000000000000.log",
                        "00000000000000000000.timeindex", "00000000000000000010.snapshot",
                        "leader-epoch-checkpoint"]
    assert "which has no log file" in caplog.text


def test_empty_directory_gets_a_segment_at_the_log_start_offset(tmp_path, clock) -> None:  # type: ignore
    d = tmp_path / "t-0"
    d.mkdir()
    loaded = load_segments(str(d), small_config(), clock=clock, fs=DEFAULT_FS,
                           recovery_point=0, log_start_offset=500, had_clean_shutdown=False,
                           on_batch=lambda h: None)
    assert [s.base_offset for s in loaded.segments] == [500]
    assert loaded.next_offset == 500


@pytest.mark.parametrize("clean", [True, False])
def test_last_segment_is_made_active(tmp_path, clock, clean: bool) -> None:  # type: ignore
    d = write_log(tmp_path, clock)
    loaded = load(d, clock, clean=clean)
    active = loaded.segments[-1]
    active.offset_index.load()
    assert active.offset_index.max_entries > active.offset_index.entries  # preallocated again
