"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

The compose file must satisfy the Compose specification's JSON schema (a vendored copy, see
tests/compose_spec/), hold the services the project documents, and each broker service's
`command` must really start a broker: it is run here as a local process, with the container's
host names, ports and data directory replaced by loopback ones, and a client produces and
consumes through it and scrapes its metrics.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
SCHEMA = Path(__file__).resolve().parent / "compose_spec" / "compose-spec.json"
READY_TIMEOUT_S = 60


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def broker_services(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in doc["services"].items()
            if s.get("command", [])[:2] == ["spark-log", "broker"]}


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_compose_file_satisfies_the_compose_specification() -> None:
    schema = json.loads(SCHEMA.read_text())
    errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(compose())]
    assert errors == []


def test_compose_file_has_broker_spark_and_jupyter_services() -> None:
    doc = compose()
    services = doc["services"]
    assert list(broker_services(doc)) == ["broker-1"]
    master, worker, jupyter = (services[n] for n in ("spark-master", "spark-worker", "jupyter"))
    assert master["command"][:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    assert worker["command"][:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]
    assert "spark://spark-master:7077" in worker["command"]
    assert "./notebooks:/home/spark/notebooks" in jupyter["volumes"]
    assert jupyter["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == "broker-1:9092"
    for service in (master, worker, services["broker-1"]):
        assert service["build"] == {"context": ".", "target": "base"}
    assert jupyter["build"] == {"context": ".", "target": "jupyter"}


def test_each_broker_is_advertised_by_its_service_name_with_a_data_volume() -> None:
    doc = compose()
    for name, service in broker_services(doc).items():
        command = service["command"]
        port = flag(command, "--port")
        assert f"advertised.listeners=PLAINTEXT://{name}:{port}" in command
        assert flag(command, "--host") == "0.0.0.0"
        volume, _, target = service["volumes"][0].partition(":")
        assert target == flag(command, "--data-dir")
        assert volume in doc["volumes"]


def test_the_images_commands_are_installed_by_the_package() -> None:
    # The image installs this package with pip, as the test environment does: the commands
    # the services run come with it.
    bin_dir = Path(sys.executable).parent
    for command in ("spark-log", "spark-class"):
        assert (bin_dir / command).exists(), command


def test_dockerfile_installs_the_package_on_python_311_with_java_17() -> None:
    text = DOCKERFILE.read_text()
    stages = [line.split() for line in text.splitlines() if line.startswith("FROM ")]
    assert stages[0][1].startswith("python:3.11-slim")
    assert [s[-1] for s in stages] == ["base", "jupyter"]
    assert "openjdk-17-jre-headless" in text
    assert "pip install --no-cache-dir ." in text
    assert 'CMD ["spark-log", "broker"' in text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def localize(command: list[str], service: str, data_dir: Path, ports: dict[str, int]
             ) -> list[str]:
    """The service's command as a local process: loopback instead of the service name and
    0.0.0.0, free ports instead of the container's, a temporary data directory."""
    argv = [sys.executable, "-m", "spark_log.cli.main", *command[1:]]
    out = []
    for arg in argv:
        arg = arg.replace(service, "127.0.0.1").replace("0.0.0.0", "127.0.0.1")
        arg = str(data_dir) if arg == "/data" else arg
        for container_port, local in ports.items():
            arg = str(local) if arg == container_port else arg.replace(f":{container_port}",
                                                                       f":{local}")
        out.append(arg)
    return out


def _await_ready(proc: subprocess.Popen[bytes], data_dir: Path, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if json.loads((data_dir / "broker.json").read_text())["pid"] == proc.pid:
                return
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.02)
    raise TimeoutError(log.read_text())


def _round_trip(bootstrap: str, broker_id: int) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    brokers = admin.list_topics(timeout=30).brokers
    assert [(b.id, f"{b.host}:{b.port}") for b in brokers.values()] == [(broker_id, bootstrap)]
    admin.create_topics([NewTopic("compose-check", 1)])["compose-check"].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce("compose-check", f"record-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compose-check"})
    consumer.assign([TopicPartition("compose-check", 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    consumer.close()
    return values


def test_broker_service_commands_start_working_brokers(tmp_path: Path) -> None:
    for name, service in broker_services(compose()).items():
        command = service["command"]
        container_ports = [p.split(":")[-1] for p in service["ports"]]
        ports = {p: _free_port() for p in container_ports}
        data_dir = tmp_path / name
        argv = localize(command, name, data_dir, ports)
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            _await_ready(proc, data_dir, log)
            bootstrap = f"127.0.0.1:{ports[flag(command, '--port')]}"
            values = _round_trip(bootstrap, int(flag(command, "--broker-id")))
            metrics_url = f"http://127.0.0.1:{ports[flag(command, '--metrics-port')]}/metrics"
            with urllib.request.urlopen(metrics_url, timeout=10) as response:
                metrics = response.read().decode()
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
        assert values == [b"record-0", b"record-1", b"record-2"]
        assert 'spark_log_messages_in_total{topic="compose-check"} 3.0' in metrics
        assert code == 0, log.read_text()
