"""Crash safety of log compaction: a child process cleans a log and SIGKILLs itself just before
each step of the segment swap (and while writing the cleaned files, and before the checkpoint);
the log must then reopen valid, with every offset it had, every key's latest value, no
leftover .cleaned/.swap files, and clean to completion afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from spark_log.clock import ManualClock
from spark_log.records import Record
from spark_log.storage.cleaner.log_cleaner import InlineDriver, LogCleaner
from spark_log.storage.log.log_manager import LogManager

from .cleaner_support import (
    CRASH_POINTS,
    Update,
    clean_until_done,
    compact_config,
    latest,
    read_all,
    updates_over,
    write_updates,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(data_dir: str, rounds_before: int) -> tuple[list[Update], dict[int, Record]]:
    """A dirty compacted log, cleaned `rounds_before` times with more updates in between;
    returns every update and the records readable by offset."""
    logs = LogManager(data_dir, default_config=compact_config(), clock=ManualClock())
    log = logs.get_or_create("t", 0)
    updates: list[Update] = []
    for phase in range(rounds_before + 1):
        batch = updates_over(keys=30, count=900 + 7 * phase, tombstone_every=11)
        write_updates(log, batch)
        log.roll()
        updates += batch
        if phase < rounds_before:
            clean_until_done(LogCleaner(logs, driver=InlineDriver()))
    records = {r.offset: r for r in read_all(log).records}
    logs.close()
    return updates, records


def crash_child(data_dir: str, point: str, skip_groups: int) -> None:
    child = subprocess.run(
        [sys.executable, "-m", "tests.storage.cleaner_crash_child", data_dir, point,
         str(skip_groups)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, \
        f"the child was not killed at {point!r} ({child.returncode}):\n{child.stderr}"


def check_reopened(data_dir: str, updates: list[Update], records: dict[int, Record]) -> None:
    logs = LogManager(data_dir, default_config=compact_config(), clock=ManualClock())
    log = logs.get("t", 0)
    assert log is not None
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    back = read_all(log)  # valid batches, CRCs, increasing offsets
    assert back.by_key() == latest(updates), "a key lost its latest value"
    assert all(records[r.offset] == r for r in back.records), "a record changed"
    assert log.log_end_offset == max(records) + 1
    log.update_high_watermark(log.log_end_offset)
    clean_until_done(LogCleaner(logs, driver=InlineDriver()))
    final = read_all(log)
    assert final.by_key() == latest(updates)
    assert len(final.records) == len(latest(updates))
    logs.close()


@pytest.mark.parametrize("point", list(CRASH_POINTS))
@pytest.mark.parametrize(("rounds_before", "skip_groups"), [(0, 0), (0, 2), (1, 0)],
                         ids=["first round", "third group", "merging round"])
def test_sigkill_at_each_step_of_cleaning_loses_nothing(tmp_path, point, rounds_before,
                                                        skip_groups) -> None:  # type: ignore
    data_dir = str(tmp_path)
    updates, records = build(data_dir, rounds_before)
    crash_child(data_dir, point, skip_groups)
    check_reopened(data_dir, updates, records)
