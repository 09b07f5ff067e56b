"""100,000 mutated request frames against the real broker: it stays up, its memory stays bounded,
and a well-behaved client beside it sees no error and loses nothing."""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_log.protocol import encode_request, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build
from spark_log.records import Compression, Record, build_batch
from tests.broker_process import BrokerProcess

FRAMES = int(os.environ.get("FUZZ_FRAMES", "100000"))
SEED = 20261122
MAX_RSS_GROWTH_BYTES = 200 << 20


def seed_requests(topic: str) -> list[bytes]:
    """Valid request frames of many APIs and versions, to be mutated."""
    records = build_batch([Record(i, 1_700_000_000_000, b"k", b"v" * 20) for i in range(5)],
                          compression=Compression.GZIP)
    bodies = [
        (ApiKey.API_VERSIONS, 3, {"client_software_name": "fuzz", "client_software_version": "1"}),
        (ApiKey.API_VERSIONS, 0, {}),
        (ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                               "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False}),
        (ApiKey.METADATA, 1, {"topics": None}),
        (ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout": 1000,
                             "topic_data": [{"name": topic, "partition_data": [
                                 {"index": 0, "records": records}]}]}),
        (ApiKey.PRODUCE, 3, {"transactional_id": None, "acks": -1, "timeout": 1000,
                             "topic_data": [{"name": topic, "partition_data": [
                                 {"index": 0, "records": records}]}]}),
        (ApiKey.FETCH, 11, {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 65536,
                            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                            "rack_id": "", "forgotten_topics_data": [],
                            "topics": [{"topic": topic, "partitions": [
                                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                 "log_start_offset": -1, "partition_max_bytes": 65536}]}]}),
        (ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": -2}]}]}),
        (ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": "fuzz-created", "num_partitions": 1,
                                               "replication_factor": 1, "assignments": [],
                                               "configs": []}],
                                   "timeout": 1000, "validate_only": True}),
        (ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                     "configuration_keys": None}],
                                      "include_synonyms": True, "include_documentation": False}),
    ]
    frames = []
    for key, version, body in bodies:
        spec = spec_for(key)
        assert spec is not None
        frames.append(encode_request(1, "fuzz", build(spec.request_type(version), body)))
    return frames


def mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame[4:])
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.5 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif kind < 0.7 and data:
            i = rng.randrange(len(data))
            data[i] = rng.choice((0x00, 0x7F, 0x80, 0xFF))
        elif kind < 0.85 and data:
            del data[rng.randrange(len(data)):]
        else:
            i = rng.randrange(len(data) + 1)
            data[i:i] = rng.randbytes(rng.randint(1, 8))
    if rng.random() < 0.02:  # occasionally lie about the size
        return struct.pack(">i", rng.choice((-1, 0, len(data) + 3, 1 << 30))) + bytes(data)
    return struct.pack(">i", len(data)) + bytes(data)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def answered(sock: socket.socket) -> bool:
    """Whether the broker answered the frame just sent. False when it closed the connection, or
    said nothing within the timeout: an acks=0 produce, or a fetch whose mutated max_wait parks
    it for hours — the connection is then given up, as a client would."""
    try:
        head = sock.recv(4)
    except OSError:  # TimeoutError included
        return False
    if len(head) < 4:
        return False
    size = struct.unpack(">i", head)[0]
    while size > 0:
        chunk = sock.recv(min(size, 1 << 16))
        if not chunk:
            return False
        size -= len(chunk)
    return True


def blast(bootstrap: str, frames: list[bytes], rng: random.Random) -> tuple[int, int]:
    """Send FRAMES mutated frames one at a time, each answered or followed by a close, opening a
    new connection whenever the broker closes one. Returns (frames, connections closed)."""
    host, port = bootstrap.rsplit(":", 1)
    sent = closed = 0
    sock = None
    while sent < FRAMES:
        if sock is None:
            sock = socket.create_connection((host, int(port)), timeout=1)
        frame = mutate(rng, rng.choice(frames))
        try:
            sock.sendall(frame)
        except OSError:
            sock.close()
            sock, closed = None, closed + 1
            continue
        sent += 1
        lied = struct.unpack_from(">i", frame)[0] != len(frame) - 4
        if lied or not answered(sock):
            # a frame whose size prefix lies leaves the stream unframed: start a new connection
            sock.close()
            sock, closed = None, closed + 1
    if sock is not None:
        sock.close()
    return sent, closed


class SteadyClient:
    """Produces one message every few ms for as long as the fuzzing runs, recording failures."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        self.topic = topic
        self.errors: list[object] = []
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.producer.produce(self.topic, value=str(self.sent).encode(),
                                  on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0.005)
        assert self.producer.flush(30) == 0

    def _delivered(self, err: object, _msg: object) -> None:
        if err is not None:
            self.errors.append(err)


def test_fuzzed_frames_leave_broker_and_neighbours_unharmed(broker_factory) -> None:
    broker: BrokerProcess = broker_factory({"auto.create.topics.enable": "false"})
    assert broker.proc is not None
    target, steady_topic = f"fuzz-{uuid.uuid4().hex[:6]}", f"steady-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name in (target, steady_topic):
        admin.create_topics([NewTopic(name, 1)])[name].result(30)
    rss_before = rss_bytes(broker.proc.pid)

    steady = SteadyClient(broker.bootstrap, steady_topic)
    steady.thread.start()
    started = time.monotonic()
    sent, closed = blast(broker.bootstrap, seed_requests(target), random.Random(SEED))
    steady.stop.set()
    steady.thread.join(60)
    elapsed = time.monotonic() - started

    assert sent == FRAMES
    assert 0 < closed < FRAMES  # both kinds happened: rejected requests and dropped connections
    assert broker.proc.poll() is None, f"broker died:\n{broker.log()}"
    assert steady.errors == []
    assert steady.sent > 0
    growth = rss_bytes(broker.proc.pid) - rss_before
    assert growth < MAX_RSS_GROWTH_BYTES, f"broker RSS grew by {growth >> 20} MiB"

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fuzz-check"})
    consumer.assign([TopicPartition(steady_topic, 0, OFFSET_BEGINNING)])
    values = []
    deadline = time.monotonic() + 60
    while len(values) < steady.sent and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(int(msg.value()))
    consumer.close()
    assert values == list(range(steady.sent)), f"after {elapsed:.0f}s of fuzzing"
