"""Crash safety: a child appends with flush.messages=1 and is killed with SIGKILL at random
moments; after every kill the log must reopen with every offset reported durable present,
contiguous offsets, valid CRCs, reads that return only valid batches, and a leader epoch entry
at the first batch of each epoch (each child appends at an epoch of its own)."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys

import pytest

from spark_log.records.batch_header import iter_headers, verify_crc
from spark_log.storage import LogManager, PartitionLog

from .crash_child import CONFIG

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILLS = 50


def run_child_until_killed(data_dir: str, seed: int, wait_for: int) -> list[int]:
    """Start the child, wait until it reported `wait_for` appends, SIGKILL it; returns every
    offset it reported (all of them durable)."""
    child = subprocess.Popen([sys.executable, "-m", "tests.storage.crash_child", data_dir,
                              str(seed)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    reported: list[int] = []
    try:
        assert child.stdout is not None
        while len(reported) < wait_for:
            line = child.stdout.readline()
            if not line:
                _, err = child.communicate(timeout=10)
                pytest.fail(f"child exited with {child.returncode} before being killed: {err}")
            reported.append(int(line))
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    reported += [int(line) for line in rest.split("\n")[:-1]]  # a torn last line is no report
    return reported


def check_log(log: PartitionLog, durable: int, rng: random.Random) -> None:
    """Every offset < `durable` present; offsets contiguous; every batch valid; the leader
    epoch cache starts each epoch of the batches at its first batch."""
    end = log.log_end_offset
    assert end >= durable, f"lost durable offsets: end {end} < {durable}"
    offset = expected = log.log_start_offset
    first_of_epoch: dict[int, int] = {}
    while offset < end:
        data = log.read(offset, 1 << 20).read_bytes()
        assert data, f"empty read at {offset} below the end {end}"
        for pos, header in iter_headers(data):
            verify_crc(data, pos, header)
            assert header.base_offset == expected, "offsets are not contiguous"
            assert header.records_count == header.last_offset_delta + 1
            first_of_epoch.setdefault(header.partition_leader_epoch, header.base_offset)
            expected = header.next_offset
        offset = expected
    assert expected == end
    entries = log.leader_epoch_cache.entries
    assert [e for e in entries if e.epoch in first_of_epoch] == sorted(first_of_epoch.items())
    assert all(e.start_offset <= end for e in entries)
    for target in rng.sample(range(log.log_start_offset, end), min(20, end)):
        first = next(iter_headers(log.read(target, 1).read_bytes()))[1]
        assert first.base_offset <= target <= first.last_offset


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_at_random_moments_loses_nothing_durable(tmp_path, caplog) -> None:  # type: ignore
    rng = random.Random(20240607)
    data_dir = str(tmp_path)
    durable = 0  # every offset below this was reported durable by some child
    truncations = 0
    for kill in range(KILLS):
        reported = run_child_until_killed(data_dir, seed=kill, wait_for=rng.randint(1, 25))
        assert reported == sorted(reported)
        durable = max(durable, reported[-1] + 1)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            manager = LogManager(data_dir, default_config=CONFIG)
        assert not manager.had_clean_shutdown
        truncations += "Truncated" in caplog.text
        log = manager.get("crash", 0)
        assert log is not None
        check_log(log, durable, rng)
        if kill % 10 == 9:
            manager.close()  # now and then a clean restart in between
        else:
            for partition_log in manager.logs():
                partition_log.release()  # leave it as the crash left it, for the next child
    print(f"{KILLS} kills, {durable} durable offsets, {truncations} torn tails repaired")
