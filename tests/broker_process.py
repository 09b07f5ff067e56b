"""Start the real broker as a child process on a loopback port, for tests.

The broker picks a free port (`--port 0`) and, once it listens, writes `broker.json` (pid, host,
port) into its data dir; `start()` waits for that file with this child's pid, so there is no port
race and no fixed sleep. Stop with SIGTERM (clean) or kill with SIGKILL (crash); only this child
is ever signalled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

READY_TIMEOUT_S = 60.0


class BrokerProcess:
    def __init__(self, data_dir: Path, log_path: Path, config: dict[str, str] | None = None,
                 port: int = 0, metrics_port: int | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.env = env  # added to this process's environment, when given
        self.metrics_port = metrics_port  # --metrics-port, when given
        self.log_path = log_path
        self.config = dict(config or {})
        self.requested_port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self.host = "127.0.0.1"
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> BrokerProcess:
        self.launch()
        self.await_ready()
        return self

    def launch(self) -> None:
        """Start the process; `await_ready` waits until it serves."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "spark_log.broker", "--data-dir", str(self.data_dir),
                "--host", "127.0.0.1", "--port", str(self.requested_port)]
        for key, value in self.config.items():
            argv += ["--config", f"{key}={value}"]
        if self.metrics_port is not None:
            argv += ["--metrics-port", str(self.metrics_port)]
        with open(self.log_path, "ab") as log:
            env = None if self.env is None else {**os.environ, **self.env}
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)

    def await_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        info_path = self.data_dir / "broker.json"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log()}")
            try:
                info = json.loads(info_path.read_text())
            except (FileNotFoundError, ValueError):
                info = None
            if info and info.get("pid") == self.proc.pid:
                self.host, self.port = info["host"], int(info["port"])
                # Keep the same port across restarts, as clients remember it.
                self.requested_port = self.port
                return
            time.sleep(0.02)
        raise TimeoutError(f"broker not ready after {READY_TIMEOUT_S}s:\n{self.log()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TimeoutError(f"broker did not stop within {timeout}s:\n"
                               f"{self.log()[-20000:]}") from None

    def terminate(self) -> None:
        """SIGTERM without waiting."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: a crash without any shutdown work."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except FileNotFoundError:
            return ""
