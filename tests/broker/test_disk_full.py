"""A disk that fills up under a producer: the producer gets errors, the broker stays up with its
data directory offline, nothing acknowledged is lost, and after space is freed a restart serves
every acknowledged record exactly once, in order.

The data directory is a small tmpfs mounted for the test (the test runs as root, as CI does),
so the disk really is full: writes fail with ENOSPC, not through a mock.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker import damage_support as ds
from tests.broker_process import BrokerProcess

TOPIC = "filling"
DEADLINE_S = 90.0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    assert done.returncode == 0, f"mounting a small tmpfs needs root: {done.stderr}"
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def grow(mount_point: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mount_point)], check=True)


def fill_until_refused(broker: BrokerProcess) -> tuple[list[bytes], list[str]]:
    """Produce until deliveries fail; returns the acknowledged values (in send order) and the
    errors reported."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 2, "message.timeout.ms": 6000})
    acked: list[bytes] = []
    errors: list[str] = []

    def report(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.append(msg.value())
        else:
            errors.append(err.str())

    deadline = time.monotonic() + DEADLINE_S
    sent = 0
    while not errors and time.monotonic() < deadline:
        for _ in range(200):
            producer.produce(TOPIC, b"%08d:" % sent + b"z" * 1000, partition=0,
                             on_delivery=report)
            sent += 1
        producer.poll(0.05)
    assert errors, f"the disk never filled ({sent} records sent)"
    producer.flush(30)
    return acked, errors


def restart_on_full_disk(broker: BrokerProcess) -> bool:
    """A restart before space is freed either starts (recovery dropped the torn write, leaving
    room for its few small files) or exits with one line; never a traceback."""
    before = len(broker.log_path.read_text())
    try:
        broker.start()
    except RuntimeError as e:
        assert "broker exited with 1" in str(e)
        errors = [line for line in broker.log_path.read_text()[before:].splitlines()
                  if "ERROR" in line]
        assert len(errors) == 1 and "No space left on device" in errors[0], errors
        return False
    finally:
        assert "Traceback" not in broker.log_path.read_text()[before:]
    assert broker.stop() == 0
    return True


def test_a_full_disk_refuses_writes_and_loses_nothing_acknowledged(small_disk: Path,
                                                                   tmp_path: Path) -> None:
    broker = BrokerProcess(small_disk / "data", tmp_path / "broker.log")
    try:
        fill_and_recover(broker, small_disk)
    finally:
        broker.kill()  # before the disk is unmounted, whatever happened


def fill_and_recover(broker: BrokerProcess, small_disk: Path) -> None:
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    acked, errors = fill_until_refused(broker)
    assert acked and errors
    assert broker.proc is not None and broker.proc.poll() is None  # still up, not crashed
    log = broker.log_path.read_text()
    assert "No space left on device" in log and "is offline" in log and "Traceback" not in log

    assert broker.stop() == 0  # offline: the files are only released, no clean marker
    restarted_full = restart_on_full_disk(broker)

    grow(small_disk, "64m")
    broker.start()
    stored = [value for _, value in ds.read_all(broker.bootstrap, TOPIC, committed=False)]
    assert len(stored) == len(set(stored))  # exactly once
    stored_set = set(stored)
    assert all(value in stored_set for value in acked), "an acknowledged record was lost"
    positions = [stored.index(value) for value in acked]
    assert positions == sorted(positions)  # in the order they were sent
    assert broker.stop() == 0
    print(f"{len(acked)} records acknowledged; the restart on the full disk "
          f"{'started' if restarted_full else 'was refused'}")
