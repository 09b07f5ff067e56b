"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

The compose file must satisfy the Compose specification's JSON schema (a vendored copy, see
tests/compose_spec/) and hold the services the project documents, and its broker services must
really form a cluster: each one's entrypoint script and command are run here as local processes,
as the container would run them, with the containers' host names, ports and data directories
replaced by loopback addresses, free ports and temporary directories. A client then checks that
the three nodes are one cluster, creates a topic replicated on all of them, produces and
consumes through the clients' bootstrap list and scrapes the nodes' metrics; a restarted node
finds its directories formatted and rejoins.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster_process import free_ports

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
SCHEMA = Path(__file__).resolve().parent / "compose_spec" / "compose-spec.json"
BROKERS = ["broker-1", "broker-2", "broker-3"]
READY_TIMEOUT_S = 60
AWAIT_TIMEOUT_S = 30
TOPIC = "compose-check"


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def broker_services(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services whose entrypoint runs a spark_log node."""
    return {name: s for name, s in doc["services"].items()
            if "exec spark-log broker" in " ".join(s.get("entrypoint", []))}


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def setting(command: list[str], key: str) -> str:
    """The value of `--config key=value` in a command."""
    values = [arg.partition("=")[2] for arg in command if arg.startswith(f"{key}=")]
    assert len(values) == 1, (key, command)
    return values[0]


def grace_period_s(service: dict[str, Any]) -> int:
    """The service's stop_grace_period (written in seconds): how long compose waits after
    SIGTERM before it kills the container."""
    match = re.fullmatch(r"(\d+)s", service["stop_grace_period"])
    assert match, service["stop_grace_period"]
    return int(match.group(1))


def interpolate(value: str) -> str:
    """Compose's interpolation of a value: `$$` is a literal `$`; the file uses no variables
    of the machine running compose."""
    assert "$" not in value.replace("$$", ""), value
    return value.replace("$$", "$")


def test_compose_file_satisfies_the_compose_specification() -> None:
    schema = json.loads(SCHEMA.read_text())
    errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(compose())]
    assert errors == []


def test_compose_file_has_three_brokers_spark_and_jupyter() -> None:
    doc = compose()
    services = doc["services"]
    assert list(broker_services(doc)) == BROKERS
    master, worker, jupyter = (services[n] for n in ("spark-master", "spark-worker", "jupyter"))
    assert master["command"][:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    assert worker["command"][:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]
    assert "spark://spark-master:7077" in worker["command"]
    assert "./notebooks:/home/spark/notebooks" in jupyter["volumes"]
    assert jupyter["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == \
        "broker-1:9092,broker-2:9092,broker-3:9092"
    for client in (worker, jupyter):
        assert {b: client["depends_on"][b] for b in BROKERS} == \
            {b: {"condition": "service_healthy"} for b in BROKERS}
        assert client["depends_on"]["spark-master"] == {"condition": "service_started"}
    for service in (master, worker, *(services[b] for b in BROKERS)):
        assert service["build"] == {"context": ".", "target": "base"}
    assert jupyter["build"] == {"context": ".", "target": "jupyter"}


def test_the_brokers_are_three_combined_nodes_of_one_quorum() -> None:
    doc = compose()
    brokers = broker_services(doc)
    voters = {f"{n}@{name}:9093" for n, name in enumerate(BROKERS, 1)}
    for n, (name, service) in enumerate(brokers.items(), 1):
        command = service["command"]
        assert service["hostname"] == name
        assert flag(command, "--broker-id") == str(n)
        assert setting(command, "process.roles") == "broker,controller"
        assert set(setting(command, "controller.quorum.voters").split(",")) == voters
        assert setting(command, "controller.listener.names") == "CONTROLLER"
        assert setting(command, "listeners") == \
            "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093"
        assert setting(command, "advertised.listeners") == f"PLAINTEXT://{name}:9092"
        # Clients on 9092 and metrics on 9404 in every container; distinct host ports.
        assert service["ports"] == [f"{9091 + n}:9092", f"{9403 + n}:9404"]
        assert service["environment"]["METRICS_PORT"] == "9404"
        # Past broker.session.timeout.ms (9 s), the longest a controlled shutdown waits.
        assert grace_period_s(service) >= 20
        assert "9092" in " ".join(service["healthcheck"]["test"])
        volume, _, target = service["volumes"][0].partition(":")
        assert (volume, target) == (f"{name}-data", flag(command, "--data-dir"))
        assert volume in doc["volumes"]
    cluster_ids = {s["environment"]["CLUSTER_ID"] for s in brokers.values()}
    assert len(cluster_ids) == 1 and len(cluster_ids.pop()) == 22


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
    # The native parts are built in the image: setup.py is copied, a compiler is there for it.
    assert "COPY pyproject.toml setup.py" in text and "gcc libc6-dev" in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "setup.py" not in ignored and "spark_log" not in ignored
    assert 'CMD ["spark-log", "broker"' in text
    # The broker services replace the entrypoint: they keep the image's init in front.
    assert 'ENTRYPOINT ["tini", "--"]' in text
    for service in broker_services(compose()).values():
        assert service["entrypoint"][:2] == ["tini", "--"]


# ---- the broker services as local processes ----------------------------------------------

ADDRESS = re.compile(r"([\w.-]+):(\d+)")


class Localizer:
    """Rewrites the services' values for loopback: `broker-N:P` and a service's own
    `0.0.0.0:P` become 127.0.0.1 and the free port standing for that node's container port P,
    a container port on its own becomes the local port, a volume's mount point a directory
    under `root`."""

    def __init__(self, services: dict[str, dict[str, Any]], root: Path) -> None:
        wanted = {name: sorted({p.split(":")[-1] for p in s["ports"]}
                               | set(re.findall(r"0\.0\.0\.0:(\d+)", " ".join(s["command"]))))
                  for name, s in services.items()}
        free = iter(free_ports(sum(map(len, wanted.values()))))
        self.ports = {name: {p: next(free) for p in ports} for name, ports in wanted.items()}
        self.mounts = {name: {v.partition(":")[2]: str(root / name / v.partition(":")[0])
                              for v in s["volumes"]} for name, s in services.items()}

    def __call__(self, value: str, service: str | None = None) -> str:
        def local(match: re.Match[str]) -> str:
            host, port = match.groups()
            owner = service if host == "0.0.0.0" else host
            if owner in self.ports and port in self.ports[owner]:
                return f"127.0.0.1:{self.ports[owner][port]}"
            return match.group(0)

        value = interpolate(value)
        if service is not None:
            if value in self.ports[service]:
                return str(self.ports[service][value])
            if value in self.mounts[service]:
                return self.mounts[service][value]
        return ADDRESS.sub(local, value)


class LocalNode:
    """A broker service's entrypoint (after tini, the image's init) and command, run as a
    child process: the entrypoint's shell script formats the directories and then execs the
    node, so this child's pid is the node's."""

    def __init__(self, name: str, service: dict[str, Any], localize: Localizer,
                 bin_dir: Path, log: Path) -> None:
        self.name, self.log = name, log
        self.argv = [localize(a, name) for a in [*service["entrypoint"][2:],
                                                 *service["command"]]]
        self.data_dir = Path(localize(flag(service["command"], "--data-dir"), name))
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                    **{k: localize(str(v), name) for k, v in service["environment"].items()}}
        self.bootstrap = localize(setting(service["command"], "advertised.listeners"),
                                  name).removeprefix("PLAINTEXT://")
        self.metrics_url = f"http://127.0.0.1:{self.env['METRICS_PORT']}/metrics"
        self.grace_period_s = grace_period_s(service)
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> None:
        # Its own process group: `kill` can reach whatever the script left running.
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def await_ready(self) -> None:
        """Until the node serves clients: its broker.json names this child."""
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                if json.loads((self.data_dir / "broker.json").read_text())["pid"] == \
                        self.proc.pid:
                    return
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.02)
        raise TimeoutError(self.log.read_text())

    def wait(self) -> int:
        """The exit code, within the grace period compose gives a stopping container."""
        assert self.proc is not None
        return self.proc.wait(self.grace_period_s)

    def terminate(self) -> None:
        """SIGTERM to the child, as tini forwards it to the container's command."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to this child's process group (only what this child started)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(READY_TIMEOUT_S)


def eventually(check: Callable[[], Any], what: str) -> Any:
    """`check()`'s first truthy result within AWAIT_TIMEOUT_S."""
    deadline = time.monotonic() + AWAIT_TIMEOUT_S
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise TimeoutError(what)


def brokers_seen(bootstrap: str) -> dict[int, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    brokers = admin.list_topics(timeout=10).brokers.values()
    return {b.id: f"{b.host}:{b.port}" for b in brokers}


def replicas_seen(bootstrap: str, name: str = TOPIC) -> dict[int, tuple[int, list[int]]]:
    """A topic's partitions as a node describes them: {partition: (leader, replicas)}."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = admin.list_topics(name, timeout=10).topics[name]
    if topic.error is not None:
        return {}
    return {p.id: (p.leader, sorted(p.replicas)) for p in topic.partitions.values()}


def round_trip(bootstrap: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(TOPIC, f"record-{i}".encode(), partition=0)
    assert producer.flush(AWAIT_TIMEOUT_S) == 0
    # A consumer with a group looks up its coordinator (FindCoordinator), which creates
    # __consumer_offsets; it reads an assigned partition and commits nothing.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": TOPIC,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + AWAIT_TIMEOUT_S
    while len(values) < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    consumer.close()
    return values


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def spark_log_shim(bin_dir: Path) -> None:
    """`spark-log` on PATH for the entrypoint script: this interpreter running the CLI from
    the checkout under test."""
    bin_dir.mkdir()
    shim = bin_dir / "spark-log"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m spark_log.cli.main "$@"\n')
    shim.chmod(0o755)


def test_broker_services_form_a_three_node_cluster(tmp_path: Path) -> None:
    doc = compose()
    services = broker_services(doc)
    localize = Localizer(services, tmp_path)
    spark_log_shim(tmp_path / "bin")
    nodes = [LocalNode(name, service, localize, tmp_path / "bin", tmp_path / f"{name}.log")
             for name, service in services.items()]
    expected = {n: node.bootstrap for n, node in enumerate(nodes, 1)}
    cluster_id = services["broker-1"]["environment"]["CLUSTER_ID"]
    bootstrap = localize(doc["services"]["jupyter"]["environment"]["KAFKA_BOOTSTRAP_SERVERS"])
    # The clients' bootstrap list names every node.
    assert sorted(bootstrap.split(",")) == sorted(expected.values())

    def logs() -> str:
        return "\n".join(f"---- {n.name}\n{n.log.read_text()}" for n in nodes)

    try:
        # A quorum forms only once a majority runs: start all three, then await each.
        for node in nodes:
            node.launch()
        for node in nodes:
            node.await_ready()
        for node in nodes:
            eventually(lambda node=node: brokers_seen(node.bootstrap) == expected,
                       f"{node.name} lists brokers {expected}:\n{logs()}")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_cluster(request_timeout=10).result(AWAIT_TIMEOUT_S)
        assert described.cluster_id == cluster_id

        first, *others = nodes
        admin = AdminClient({"bootstrap.servers": first.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(AWAIT_TIMEOUT_S)
        partitions: dict[int, tuple[int, list[int]]] = {}
        for node in others:
            partitions = eventually(lambda node=node: replicas_seen(node.bootstrap),
                                    f"{node.name} sees {TOPIC}:\n{logs()}")
            assert sorted(partitions) == [0, 1, 2]
            assert all(replicas == [1, 2, 3] and leader in expected
                       for leader, replicas in partitions.values()), partitions

        values = round_trip(bootstrap)
        # The internal topic, with Kafka's default replication factor 3: on every node.
        offsets = eventually(lambda: replicas_seen(first.bootstrap, "__consumer_offsets"),
                             f"__consumer_offsets exists:\n{logs()}")
        assert all(replicas == [1, 2, 3] for _, replicas in offsets.values()), offsets
        metrics = {n: scrape(node.metrics_url) for n, node in enumerate(nodes, 1)}

        # Compose restarts a node with the same entrypoint: its volume is formatted already.
        last = nodes[-1]
        last.terminate()
        restart_code = last.wait()
        last.launch()
        last.await_ready()
        eventually(lambda: brokers_seen(last.bootstrap) == expected,
                   f"{last.name} lists brokers {expected} after its restart:\n{logs()}")
        assert sorted(eventually(lambda: replicas_seen(last.bootstrap), TOPIC)) == [0, 1, 2]
    finally:
        for node in nodes:
            node.terminate()
        try:
            codes = [node.wait() for node in nodes]
        finally:
            for node in nodes:
                node.kill()
    assert values == [b"record-0", b"record-1", b"record-2"]
    leader = partitions[0][0]
    assert f'spark_log_messages_in_total{{topic="{TOPIC}"}} 3.0' in metrics[leader]
    assert all("# TYPE spark_log_requests_total counter" in m for m in metrics.values())
    assert restart_code == 0, logs()
    assert codes == [0, 0, 0], logs()
