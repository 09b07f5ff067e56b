"""notebooks/explore_topics.ipynb executed headless (nbclient) against a broker process with
generated data, its bootstrap server taken from KAFKA_BOOTSTRAP_SERVERS as in the Compose
Jupyter service. Its tables are read back from the HTML outputs and checked against what the
broker holds (records read with confluent-kafka, log files in the data directory): topics and
partitions, the latest messages decoded from JSON and from Avro, the rate plot and its summary,
consumer-group lag. Bad parameters stop it with one sentence, not a traceback. The committed
notebook has no outputs."""

from __future__ import annotations

import base64
import collections
import io
import json
import os
import socket
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import fastavro
import nbformat
import pytest
import yaml
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from jobs import generate_events
from jobs.events import StreamSpec, synthesize
from tests.broker_process import BrokerProcess
from tests.datasource.conftest import create_topic, produce, unique
from tests.jobs import topics
from tests.jobs.topics import Record

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "explore_topics.ipynb"
EXECUTE_TIMEOUT_S = 240
START_MS = 1_714_564_800_000  # on a whole second: 1-second buckets hold 10 clicks each
# Records from 2024 are past the default retention (7 days): without this, the broker's
# retention check (every 5 minutes) would delete them while a slow test still reads them.
KEEP = {"retention.ms": "-1"}
GROUP = "nb-readers"
AVRO_SCHEMA = {"type": "record", "name": "Order", "fields": [
    {"name": "order_id", "type": "string"}, {"name": "total", "type": "double"}]}

Table = list[dict[str, str]]


class _Tables(HTMLParser):
    """The tables of pandas' HTML output: one dict per body row, keyed by column name (the
    index column left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Table] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._header: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "table":
            self.tables.append([])
            self._header = []
        elif tag == "tr":
            self._row = []
        elif tag in ("th", "td"):
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if not self._header:
                self._header = self._row[1:]
            else:
                self.tables[-1].append(dict(zip(self._header, self._row[1:], strict=True)))
            self._row = None


class Run:
    """One execution of the notebook: its cells with their outputs, or the error it stopped
    with."""

    def __init__(self, nb: nbformat.NotebookNode, error: CellExecutionError | None) -> None:
        self.nb, self.error = nb, error

    def outputs(self, mime: str) -> list[str]:
        return [o["data"][mime] for c in self.nb.cells for o in c.get("outputs", [])
                if mime in o.get("data", {})]

    def streams(self) -> str:
        return "".join(o["text"] for c in self.nb.cells for o in c.get("outputs", [])
                       if o["output_type"] == "stream")

    def errors(self) -> list[nbformat.NotebookNode]:
        return [o for c in self.nb.cells for o in c.get("outputs", [])
                if o["output_type"] == "error"]

    def table(self, *columns: str) -> Table:
        """The one displayed table whose columns start with `columns`."""
        found = []
        for html in self.outputs("text/html"):
            parser = _Tables()
            parser.feed(html)
            found += [t for t in parser.tables
                      if t and tuple(t[0])[:len(columns)] == columns]
        assert len(found) == 1, f"{len(found)} tables with columns {columns}"
        return found[0]


def execute(params: dict[str, object], km: KernelManager) -> Run:
    """Run every cell in the kernel of `km`, with `params` set after the parameters cell (as
    papermill does)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    assignments = "\n".join(f"{name} = {value!r}" for name, value in params.items())
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(assignments))
    client = NotebookClient(nb, km=km, timeout=EXECUTE_TIMEOUT_S)
    error = None
    try:
        client.execute()
    except CellExecutionError as e:
        error = e
    finally:
        if client.kc is not None:
            client.kc.stop_channels()
    return Run(nb, error)


def completed(run: Run) -> Run:
    assert run.error is None, str(run.error)
    return run


def log_bytes(broker: BrokerProcess, topic: str, partition: int) -> int:
    """The size of a partition's segment files, as the broker keeps them on disk."""
    [directory] = [d for d in broker.data_dir.rglob(f"{topic}-{partition}") if d.is_dir()]
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def latest(records: list[Record], count: int) -> list[Record]:
    return sorted(records, key=lambda r: (r.timestamp, r.offset), reverse=True)[:count]


def shown_ms(cell: str) -> int:
    """A timestamp cell of a pandas table (UTC, naive) in epoch milliseconds."""
    import pandas as pd

    return int(pd.Timestamp(cell, tz="UTC").value // 1_000_000)


def end_offsets(records: list[Record]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for r in records:
        ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)
    return ends


@pytest.fixture(scope="module")
def clicks(shared_broker: BrokerProcess) -> Iterator[tuple[str, list[Record]]]:
    """300 click events over 30 s in 3 partitions, and group `nb-readers` 40 behind on
    partition 0 and caught up on partition 1."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = create_topic(shared_broker, unique("clicks"), 3, KEEP)
    spec = StreamSpec(count=300, rate=10, start_ms=START_MS, seed=41)
    generate_events.produce(shared_broker.bootstrap, topic, synthesize(spec), rate=None)
    records = topics.read_all(shared_broker.bootstrap, topic)
    ends = end_offsets(records)
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        GROUP, [TopicPartition(topic, 0, ends[0] - 40), TopicPartition(topic, 1, ends[1])])]
    )[GROUP].result(30)
    yield topic, records


@pytest.fixture(scope="module")
def reused_kernel(shared_broker: BrokerProcess,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelManager]:
    """One Python kernel for all runs, with the broker in its environment as docker-compose.yml
    gives it to Jupyter. The first run is fresh; the next ones run all cells again with other
    parameters, as a user does, and restart Spark in the JVM the first run launched (which
    makes them quicker)."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": shared_broker.bootstrap,
           # The JVM's quick compiler only: most of the CPU time of a run this short goes to
           # compiling Spark's code, and the machine may be shared. Results do not depend on it.
           "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1"}
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path_factory.mktemp("nb")), env=env)
    try:
        yield km
    finally:
        km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def explored(clicks: tuple[str, list[Record]], reused_kernel: KernelManager) -> Run:
    """The notebook run on the clicks topic; the tests below read its outputs."""
    return completed(execute({"TOPIC": clicks[0], "SAMPLE_SIZE": 10}, reused_kernel))


def test_topics_table_shows_offsets_and_sizes_the_broker_holds(
        shared_broker: BrokerProcess, clicks: tuple[str, list[Record]], explored: Run) -> None:
    topic, records = clicks
    ends = end_offsets(records)
    per_partition = collections.Counter(r.partition for r in records)
    sizes = {p: log_bytes(shared_broker, topic, p) for p in range(3)}
    rows = [r for r in explored.table("topic", "partition", "leader") if r["topic"] == topic]
    assert [(r["partition"], r["start_offset"], r["end_offset"], r["messages"], r["size_bytes"])
            for r in rows] == [(str(p), "0", str(ends[p]), str(per_partition[p]), str(sizes[p]))
                               for p in range(3)]
    [total] = [r for r in explored.table("topic", "partitions") if r["topic"] == topic]
    assert total == {"topic": topic, "partitions": "3", "messages": "300",
                     "size_bytes": str(sum(sizes.values()))}


def test_sample_is_the_latest_messages_with_json_fields_as_columns(
        clicks: tuple[str, list[Record]], explored: Run) -> None:
    _, records = clicks
    sample = explored.table("partition", "offset", "timestamp", "key")
    expected = latest(records, 10)
    assert [(int(r["partition"]), int(r["offset"]), shown_ms(r["timestamp"]), r["key"])
            for r in sample] == [(e.partition, e.offset, e.timestamp, e.key.decode())
                                 for e in expected]
    for shown, record in zip(sample, expected, strict=True):
        value = json.loads(record.value)
        assert (shown["event_id"], shown["event_type"], shown["event_time"]) == (
            value["event_id"], value["event_type"], value["event_time"])


def test_rate_plot_is_an_image_and_its_summary_counts_per_partition(
        clicks: tuple[str, list[Record]], explored: Run) -> None:
    _, records = clicks
    [png] = explored.outputs("image/png")
    assert base64.b64decode(png).startswith(b"\x89PNG\r\n\x1a\n")
    assert ("30 buckets of 1 second from 2024-05-01 12:00:00 to 2024-05-01 12:00:30 (UTC)"
            in explored.streams())
    per_second = collections.Counter((r.partition, r.timestamp // 1000) for r in records)
    summary = {r["partition"]: r for r in explored.table("partition", "messages", "mean_per_s")}
    for p in range(3):
        count = sum(n for (q, _), n in per_second.items() if q == p)
        peak = max(n for (q, _), n in per_second.items() if q == p)
        assert (summary[str(p)]["messages"], float(summary[str(p)]["mean_per_s"]),
                float(summary[str(p)]["peak_per_s"])) == (str(count), round(count / 30, 2), peak)
    assert (summary["all"]["messages"], float(summary["all"]["mean_per_s"]),
            float(summary["all"]["peak_per_s"])) == ("300", 10.0, 10.0)


def test_lag_table_shows_the_group_behind_by_partition_and_in_total(
        clicks: tuple[str, list[Record]], explored: Run) -> None:
    topic, records = clicks
    ends = end_offsets(records)
    rows = [r for r in explored.table("group", "topic", "partition", "committed_offset")
            if r["group"] == GROUP]
    assert [(r["topic"], r["partition"], r["committed_offset"], r["end_offset"], r["lag"])
            for r in rows] == [(topic, "0", str(ends[0] - 40), str(ends[0]), "40"),
                               (topic, "1", str(ends[1]), str(ends[1]), "0")]
    totals = [r for r in explored.table("group", "topic", "lag") if r["group"] == GROUP]
    assert totals == [{"group": GROUP, "topic": topic, "lag": "40"}]


def test_sample_decodes_avro_and_takes_the_latest_across_uneven_partitions(
        shared_broker: BrokerProcess, reused_kernel: KernelManager) -> None:
    """The 5 latest orders are all in partition 1: a sample that took an equal share of each
    partition would show older orders of partition 0 instead."""
    topic = create_topic(shared_broker, unique("orders"), 2, KEEP)
    schema = fastavro.parse_schema(AVRO_SCHEMA)
    for partition, numbers in ((0, range(0, 20)), (1, range(20, 30))):
        values = []
        for i in numbers:
            out = io.BytesIO()
            fastavro.schemaless_writer(out, schema, {"order_id": f"o-{i:03d}", "total": i * 1.5})
            values.append(out.getvalue())
        produce(shared_broker, topic, values, keys=[f"c{i % 4}" for i in numbers],
                partition=partition, timestamps=[START_MS + i * 1000 for i in numbers])
    run = completed(execute({"TOPIC": topic, "SAMPLE_SIZE": 5,
                             "AVRO_SCHEMA": json.dumps(AVRO_SCHEMA)}, reused_kernel))
    sample = run.table("partition", "offset", "timestamp", "key")
    assert [(r["partition"], r["offset"], shown_ms(r["timestamp"]), r["key"], r["order_id"],
             float(r["total"])) for r in sample] == [
        ("1", str(i - 20), START_MS + i * 1000, f"c{i % 4}", f"o-{i:03d}", i * 1.5)
        for i in range(29, 24, -1)]
    assert len(run.outputs("image/png")) == 1


def test_sample_shows_keys_and_values_that_are_not_json_objects_as_they_are(
        shared_broker: BrokerProcess, reused_kernel: KernelManager) -> None:
    topic = create_topic(shared_broker, unique("misc"), 1, KEEP)
    keys = [b"k0", None, b"\xff", b"k3", b"k4"]
    values = [b'{"id": 1, "offset": "inside"}', b"[1, 2]", b"plain text", b"\xff\xfe", None]
    produce(shared_broker, topic, values, keys=keys,  # type: ignore[arg-type]  # a tombstone
            timestamps=[START_MS + i * 1000 for i in range(5)])
    run = completed(execute({"TOPIC": topic, "SAMPLE_SIZE": 10}, reused_kernel))
    sample = run.table("partition", "offset", "timestamp", "key")
    assert [r["offset"] for r in sample] == ["4", "3", "2", "1", "0"]
    assert [r["key"] for r in sample] == ["k4", "k3", "b'\\xff'", "None", "k0"]
    assert [r["value"] for r in sample][:4] == ["None", "b'\\xff\\xfe'", "plain text", "[1, 2]"]
    assert (float(sample[4]["id"]), sample[4]["offset_field"]) == (1.0, "inside")


def test_a_topic_that_does_not_exist_stops_with_one_sentence_after_the_cluster_tables(
        shared_broker: BrokerProcess, clicks: tuple[str, list[Record]],
        reused_kernel: KernelManager) -> None:
    run = execute({"TOPIC": "no-such-topic"}, reused_kernel)
    assert run.error is not None, "the notebook ran on without its topic"
    [error] = run.errors()
    assert error["ename"] == "ExploreError"
    assert error["traceback"] == [
        f"ExploreError: topic 'no-such-topic' does not exist on {shared_broker.bootstrap} "
        f"(its topics: {', '.join(sorted_topics(shared_broker))}). "
        "Set TOPIC in the parameters cell."]
    assert any(r["topic"] == clicks[0] for r in run.table("topic", "partitions"))
    assert any(r["group"] == GROUP for r in run.table("group", "topic", "lag"))
    assert not run.outputs("image/png")


def sorted_topics(broker: BrokerProcess) -> list[str]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    return sorted(t for t in metadata.topics if not t.startswith("__"))[:20]


def test_an_unreachable_cluster_stops_with_one_sentence_and_no_client_log(
        reused_kernel: KernelManager) -> None:
    with socket.socket() as reserved:  # bound, never listening: connections are refused
        reserved.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{reserved.getsockname()[1]}"
        run = execute({"BOOTSTRAP_SERVERS": address, "CONNECT_TIMEOUT_S": 2}, reused_kernel)
    assert run.error is not None, "the notebook ran on without a cluster"
    [error] = run.errors()
    assert error["traceback"] == [
        f"ExploreError: cannot reach a Kafka cluster at {address} within 2 s (Failed to get "
        "metadata: Local: Broker transport failure). Check BOOTSTRAP_SERVERS in the parameters "
        "cell (or KAFKA_BOOTSTRAP_SERVERS in the environment)."]
    assert "FAIL" not in run.streams() and "Connection refused" not in run.streams()
    assert not run.outputs("text/html")


def test_committed_notebook_is_without_outputs_explained_and_reads_compose_env() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") and not c.get("execution_count")
               for c in nb.cells if c.cell_type == "code")
    assert all(nb.cells[i - 1].cell_type == "markdown"
               for i, c in enumerate(nb.cells) if c.cell_type == "code"), "a step without text"
    parameters = next(c.source for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    jupyter_env = yaml.safe_load((REPO / "docker-compose.yml").read_text())[
        "services"]["jupyter"]["environment"]
    for variable in ("KAFKA_BOOTSTRAP_SERVERS", "SPARK_MASTER_URL"):
        assert variable in jupyter_env
        assert f'os.environ.get("{variable}"' in parameters
