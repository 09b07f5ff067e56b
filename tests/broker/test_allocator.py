"""The broker process keeps the buffers of large requests for reuse: megabyte produce requests
do not fault fresh pages in for every request (spark_log.broker.allocator)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.records import Record, build_batch
from tests.broker.raw_client import RawClient
from tests.broker_process import BrokerProcess

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from spark_log.broker.allocator import keep_freed_buffers
def faults():
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[7])
def request():  # a produce request of 1 MiB as the broker receives it: four reads, one join
    pieces = [b"x" * (256 << 10) for _ in range(4)]
    frame = b"".join(pieces)
    del pieces, frame
print(keep_freed_buffers(json.loads(sys.argv[1])))
for _ in range(3):  # the heap grows to hold a request once
    request()
start = faults()
for _ in range(20):
    request()
print(faults() - start)
"""


def probe(environ: dict[str, str]) -> tuple[bool, int]:
    """(whether the thresholds were set, page faults of 20 requests' buffers after three)."""
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(environ)], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0] == "True", int(out[1])


def test_freed_buffers_are_reused_without_faulting_in_again() -> None:
    # The broker runs on glibc wherever ./dev sets it up (Debian); elsewhere nothing is tuned.
    assert platform.libc_ver()[0] == "glibc", "the allocator's thresholds are glibc's"
    done, faults = probe({})
    assert done
    assert faults < 64  # 2 MiB written per request: reused, not faulted in again


def test_a_malloc_tunable_in_the_environment_wins() -> None:
    done, faults = probe({"MALLOC_ARENA_MAX": "2"})
    assert not done
    assert faults > 2_000  # glibc's own adaptive thresholds: each request's pages come and go


def minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def produce_megabytes(broker: BrokerProcess, count: int) -> int:
    """Produce `count` one-record batches of 1 MiB; the broker's page faults while it did."""
    assert broker.proc is not None
    value = b"v" * ((1 << 20) - 200)
    batch = build_batch([Record(0, 1_700_000_000_000, None, value)])
    with RawClient(broker.bootstrap) as client:
        created = client.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": "big", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout": 10_000, "validate_only": False})
        assert created.topics[0].error_code == ErrorCode.none

        def produce() -> None:
            response = client.request(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": 1, "timeout": 5000,
                "topic_data": [{"name": "big", "partition_data": [
                    {"index": 0, "records": batch}]}]})
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.none

        for _ in range(5):  # the heap grows to hold a request once
            produce()
        start = minor_faults(broker.proc.pid)
        for _ in range(count):
            produce()
        return minor_faults(broker.proc.pid) - start


def test_broker_serves_megabyte_produce_requests_from_reused_buffers(tmp_path: Path) -> None:
    tuned = BrokerProcess(tmp_path / "tuned", tmp_path / "tuned.log").start()
    # The same broker with glibc's mmap threshold held at its initial 128 KiB (a MALLOC_
    # variable, so the broker tunes nothing): every request's buffers are mapped afresh, what
    # the test must tell apart. Left adaptive, glibc may raise its thresholds after the first
    # frees and keep the buffers too, or not, depending on how the heap happens to lie.
    adaptive = BrokerProcess(tmp_path / "adaptive", tmp_path / "adaptive.log",
                             env={"MALLOC_MMAP_THRESHOLD_": "131072"}).start()
    try:
        reused = produce_megabytes(tuned, 40)
        churned = produce_megabytes(adaptive, 40)
    finally:
        tuned.stop()
        adaptive.stop()
    # 40 MiB received: 10,240 pages if each request's buffers were faulted in afresh
    assert reused < 1_000, (reused, churned)
    assert churned > 5_000, (reused, churned)
