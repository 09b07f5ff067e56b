"""Instructions the broker executes per one-record produce request, or per small fetch,
counted by valgrind's callgrind: a repeatable measure of the request path's cost on a machine
too noisy for throughput to show a change of 10%.

A broker runs under callgrind with counting off; `rdkafka_performance` sends a warm-up, then
counting is switched on for `--requests` requests and off again.
* `--case produce` (the default): one-record produce requests (`linger.ms=0`,
  `batch.num.messages=1`, one request in flight, so every request is read and answered alone).
* `--case fetch`: a consumer keeping up with a log of one-record batches, one batch a fetch
  (`fetch.message.max.bytes=1`); the log is written and a warm-up consumer has read its start
  before counting begins. The count is per record consumed, each one fetch (the consumer's
  connection set-up, a few requests, is spread over all of them).
* `--case keeping-up`: a consumer waiting at the log end while a producer sends one-record
  requests at `--rate` a second (slow enough for every fetch to park first): per record, one
  produce request and the fetch it wakes. The count is per record produced. Its consumer asks
  for librdkafka's default 1 MiB a partition, as consumers do (the request path's sixth round
  measured it with `--fetch-max-bytes 1`, which hid a slow path only a read reaching the end
  of the segment with room to spare takes).
With `--before DIR`, another checkout's broker is measured the same way in the same run and the
ratio printed. Only user-space instructions count (not the kernel's work in the system calls).
Each broker runs under the interpreter running this script.

Usage, from the repository root:
    python bench/request_instructions.py --rdkafka-performance PATH [--requests 2000]
                                         [--case produce|fetch|keeping-up] [--rate 50]
                                         [--fetch-max-bytes N]
                                         [--before OTHER_CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY_S = 300  # a broker starting under callgrind runs some 50 times slower


WARM_UP = 300
DEFAULT_FETCH_MAX_BYTES = 1048576  # librdkafka's fetch.message.max.bytes


def instructions_per_request(repo: Path, perf: str, requests: int, case: str,
                             rate: int = 50, fetch_max_bytes: int | None = None) -> float:
    work = Path(tempfile.mkdtemp(prefix="bench-instructions-"))
    out = work / "callgrind.out"
    env = {**os.environ, "PYTHONPATH": str(repo)}
    with open(work / "broker.log", "wb") as log:
        broker = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={out}", sys.executable, "-m", "spark_log.broker",
             "--data-dir", str(work / "data"), "--host", "127.0.0.1", "--port", "0"],
            cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        port = _port(work / "data" / "broker.json", broker)
        bootstrap = ["-b", f"127.0.0.1:{port}"]
        produce = [perf, "-P", "-t", "one", "-p", "0", "-s", "100", "-a", "1",
                   "-X", "linger.ms=0", "-X", "batch.num.messages=1", "-X", "max.in.flight=1",
                   *bootstrap]
        if fetch_max_bytes is None:
            fetch_max_bytes = DEFAULT_FETCH_MAX_BYTES if case == "keeping-up" else 1
        consume = [perf, "-C", "-t", "one", "-p", "0",
                   "-X", f"fetch.message.max.bytes={fetch_max_bytes}", *bootstrap]
        if case == "produce":
            _perf([*produce, "-c", str(WARM_UP)])
            counted = [*produce, "-c", str(requests)]
        elif case == "keeping-up":
            _perf([*produce, "-c", str(WARM_UP)])
            _perf([*consume, "-o", "beginning", "-c", str(WARM_UP)])
            consumer = subprocess.Popen([*consume, "-o", str(WARM_UP), "-c", str(requests)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _control("-i", "on", broker.pid)
            _perf([*produce, "-r", str(rate), "-c", str(requests)])
            consumer.wait(600)
            _control("-i", "off", broker.pid)
            _control("-d", None, broker.pid)
            return _totals(work) / requests
        else:
            _perf([*produce, "-c", str(WARM_UP + requests)])
            _perf([*consume, "-o", "beginning", "-c", str(WARM_UP)])
            counted = [*consume, "-o", str(WARM_UP), "-c", str(requests)]
        _control("-i", "on", broker.pid)
        _perf(counted)
        _control("-i", "off", broker.pid)
        _control("-d", None, broker.pid)
        return _totals(work) / requests
    finally:
        broker.terminate()
        broker.wait(120)
        shutil.rmtree(work, ignore_errors=True)


def _perf(argv: list[str]) -> None:
    subprocess.run(argv, capture_output=True, check=True, timeout=1800)


def _port(info: Path, broker: subprocess.Popen) -> int:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if broker.poll() is not None:
            raise SystemExit(f"the broker exited with {broker.returncode}")
        try:
            return int(json.loads(info.read_text())["port"])
        except (FileNotFoundError, ValueError, KeyError):
            time.sleep(0.25)
    raise SystemExit(f"the broker did not start within {READY_S} s")


def _control(option: str, value: str | None, pid: int) -> None:
    argv = ["callgrind_control", option] + ([value] if value else []) + [str(pid)]
    subprocess.run(argv, capture_output=True, check=True, timeout=120)


def _totals(work: Path) -> int:
    """The instructions counted in every dump callgrind wrote so far."""
    total = 0
    for path in work.glob("callgrind.out*"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("totals:"):
                total += int(line.split()[1])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rdkafka-performance", required=True)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--case", choices=("produce", "fetch", "keeping-up"), default="produce")
    parser.add_argument("--rate", type=int, default=50,
                        help="records a second for --case keeping-up")
    parser.add_argument("--fetch-max-bytes", type=int,
                        help="the consumer's fetch.message.max.bytes (default: 1 for --case "
                             "fetch, librdkafka's 1 MiB for --case keeping-up)")
    parser.add_argument("--before", type=Path, help="another checkout to measure and compare")
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind (with callgrind_control) is needed: apt-get install valgrind")
    here = Path(__file__).resolve().parents[1]
    what = {"produce": "one-record produce request", "fetch": "one-batch fetch",
            "keeping-up": "record produced and fetched by a consumer keeping up"}[args.case]
    ours = instructions_per_request(here, args.rdkafka_performance, args.requests, args.case,
                                    args.rate, args.fetch_max_bytes)
    print(f"this checkout: {ours:,.0f} instructions per {what}")
    if args.before is not None:
        theirs = instructions_per_request(args.before.resolve(), args.rdkafka_performance,
                                          args.requests, args.case, args.rate,
                                          args.fetch_max_bytes)
        print(f"--before:      {theirs:,.0f} instructions per request; "
              f"this checkout x{ours / theirs:.3f}")


if __name__ == "__main__":
    main()
