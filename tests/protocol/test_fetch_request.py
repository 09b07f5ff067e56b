"""The hand-written Fetch reader agrees with kio on every version, tagged fields included, and
refuses bad input as cleanly: any body decodes to the same values or raises ProtocolError."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_log.protocol.api_table import spec_for
from spark_log.protocol.codec import encode_entity
from spark_log.protocol.errors import ProtocolError
from spark_log.protocol.fetch_request import MAX_VERSION, MIN_VERSION, decode_fetch_request
from tests.protocol.hand_readers import assert_reads_as_kio, mutated
from tests.protocol.strategies import entities

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
CHECKS = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
PARTITION_FIELDS = ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch",
                    "log_start_offset", "partition_max_bytes", "replica_directory_id",
                    "high_watermark")
DEFAULTS = {"current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1,
            "replica_directory_id": None, "high_watermark": (1 << 63) - 1}


def kio_type(version: int) -> type:
    spec = spec_for(1)
    assert spec is not None
    return spec.request_type(version)


def _partition(p) -> tuple:
    return tuple(getattr(p, f, DEFAULTS.get(f)) for f in PARTITION_FIELDS)


def as_kio_values(r) -> tuple:
    """What the broker reads of a kio FetchRequest, in the hand reader's shape."""
    state = getattr(r, "replica_state", None)
    replica = state.replica_id if state is not None else r.replica_id
    return (getattr(r, "cluster_id", None), replica,
            None if state is None else (state.replica_id, state.replica_epoch),
            r.max_wait // datetime.timedelta(milliseconds=1), r.min_bytes, r.max_bytes,
            r.isolation_level, getattr(r, "session_id", 0), getattr(r, "session_epoch", -1),
            tuple((getattr(t, "topic", None), getattr(t, "topic_id", None),
                   tuple(_partition(p) for p in t.partitions)) for t in r.topics),
            tuple((getattr(t, "topic", None), getattr(t, "topic_id", None), tuple(t.partitions))
                  for t in getattr(r, "forgotten_topics_data", ())),
            getattr(r, "rack_id", ""))


def as_values(r) -> tuple:
    state = r.replica_state
    return (r.cluster_id, r.replica_id,
            None if state is None else (state.replica_id, state.replica_epoch),
            r.max_wait_ms, r.min_bytes, r.max_bytes, r.isolation_level, r.session_id,
            r.session_epoch,
            tuple((t.topic, t.topic_id, tuple(_partition(p) for p in t.partitions))
                  for t in r.topics),
            tuple((t.topic, t.topic_id, tuple(t.partitions)) for t in r.forgotten_topics_data),
            r.rack_id)


@pytest.mark.parametrize("version", VERSIONS)
@CHECKS
@given(data=st.data())
def test_every_version_decodes_as_kio_does(version, data):
    request = data.draw(entities(kio_type(version)))
    assert as_values(decode_fetch_request(version, encode_entity(request))) == \
        as_kio_values(request)


@pytest.mark.parametrize("version", VERSIONS)
@CHECKS
@given(data=st.data(), changes=st.lists(st.tuples(st.integers(0), st.integers(0, 255)),
                                        max_size=6), cut=st.integers(0))
def test_mutated_bodies_decode_as_kio_does_or_raise_protocol_error(version, data, changes, cut):
    body = mutated(encode_entity(data.draw(entities(kio_type(version)))), changes, cut)
    assert_reads_as_kio(kio_type(version), body, lambda b: decode_fetch_request(version, b),
                        as_values, as_kio_values, f"FetchRequest v{version}")


def fetch_v4(topics_count: int, tail: bytes = b"") -> bytes:
    return struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0) + struct.pack(">i", topics_count) + tail


@pytest.mark.parametrize(("body", "message"), [
    (fetch_v4(-1), "topics was null"),
    (fetch_v4(2_000_000_000), "claims 2000000000 elements"),
    (fetch_v4(1, struct.pack(">h", -1)), "topic is null"),
    (fetch_v4(1, struct.pack(">h", 2) + b"\xff\xfe"), "not UTF-8"),
    (fetch_v4(1, struct.pack(">h", 1) + b"t" + struct.pack(">i", 1) + b"\x00\x00"),
     "truncated partition"),
    (struct.pack(">ii", -1, 500), "truncated min_bytes"),
])
def test_bad_bodies_are_refused_with_a_clear_error(body, message):
    with pytest.raises(ProtocolError, match=message):
        decode_fetch_request(4, body)


def test_versions_outside_the_reader_are_refused():
    with pytest.raises(ProtocolError, match="Fetch v3"):
        decode_fetch_request(3, b"")
