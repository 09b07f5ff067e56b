"""The cleaner's walks over a chunk of whole batches (`batch_walk`, and the native
`KeyOffsets.map_batches` / `filter_batches` / `whole_batches`), each test run against both
implementations: what each walk maps, keeps, drops and leaves to the caller, which CRCs it
checks, and that both agree on mutated chunks (the same results and table, or
CorruptRecordError from both)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.records import CorruptRecordError, Record, build_batch
from spark_log.records import record_scan as rs
from spark_log.records.batch_header import (
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    Compression,
    peek_size,
    read_header,
    write_crc,
)
from spark_log.records.batch_walk import (
    BY_CALLER,
    KEEP,
    WALK_CALLER,
    WALK_END,
    WALK_FULL,
    whole_batches,
)

from .strategies import record_lists
from .test_record_batch_fuzz import apply, mutations
from .test_record_scan import outcome

TS = 1_700_000_000_000
BIG = 1 << 40
TABLES = [pytest.param(rs.NativeKeyOffsets, id="native"),
          pytest.param(rs.PyKeyOffsets, id="python")]


def batch(base: int, keys: list[bytes | None], *, values: list[bytes | None] | None = None,
          **options: object) -> bytes:
    values = values or [b"v"] * len(keys)
    return build_batch([Record(base + i, TS, k, v) for i, (k, v) in
                        enumerate(zip(keys, values, strict=True))], base_offset=base,
                       **options)  # type: ignore[arg-type]


def with_delete_horizon(data: bytes) -> bytes:
    out = bytearray(data)
    out[22] |= DELETE_HORIZON_BIT
    write_crc(out, 0, len(out))
    return bytes(out)


def corrupt_value(data: bytes) -> bytes:
    out = bytearray(data)
    out[-1] ^= 1  # the last value byte: every record still parses, the CRC fails
    return bytes(out)


@pytest.mark.parametrize("table", TABLES)
def test_map_batches_maps_from_the_start_and_counts_control_and_empty_batches(table) -> None:  # type: ignore
    chunk = (batch(0, [b"a", b"b"]) + batch(2, [b"a", None]) + batch(4, [b"c"], is_control=True)
             + build_batch([], base_offset=5, last_offset_delta=1) + batch(7, [b"b"]))
    offsets = table(1)
    assert offsets.map_batches(chunk, 0, BIG, 3, 100) == (len(chunk), 7, 3, WALK_END)
    assert [offsets.get(k) for k in (b"a", b"b", b"c")] == [-1, 7, -1]
    assert len(offsets) == 1


@pytest.mark.parametrize("table", TABLES)
def test_map_batches_stops_at_limit_a_full_map_and_a_compressed_batch(table) -> None:  # type: ignore
    first, second = batch(0, [b"a", b"b"]), batch(2, [b"c", b"d"])
    zipped = batch(4, [b"e"], compression=Compression.GZIP)
    chunk = first + second + zipped
    offsets = table(2)
    assert offsets.map_batches(chunk, 0, 1, 0, 3) == (len(first), 1, 2, WALK_END)
    assert offsets.map_batches(chunk, len(first), BIG, 0, 3) == (len(first), -1, 0, WALK_FULL)
    assert offsets.map_batches(chunk, len(first), BIG, 0, 4) == (
        len(first + second), 3, 2, WALK_CALLER)
    assert table(2).map_batches(second, 0, BIG, 0, 1) == (len(second), 3, 2, WALK_END)


@pytest.mark.parametrize("table", TABLES)
def test_walks_leave_a_batch_whose_last_offset_overflows_to_the_caller(table) -> None:  # type: ignore
    chunk = build_batch([Record(2**63 - 2, TS, b"a", b"v")], base_offset=2**63 - 2,
                        last_offset_delta=5)
    assert table().map_batches(chunk, 0, BIG, 0, 100) == (0, -1, 0, WALK_CALLER)
    assert filtered(table(), chunk)[1] == [(0, BY_CALLER)]


@pytest.mark.parametrize("table", TABLES)
def test_map_batches_checks_each_crc_and_header(table) -> None:  # type: ignore
    good = batch(0, [b"a"])
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        table().map_batches(good + corrupt_value(batch(1, [b"b"])), 0, BIG, 0, 100)
    with pytest.raises(CorruptRecordError, match="bytes left, a batch header needs 61"):
        table().map_batches(good + b"\0" * 20, 0, BIG, 0, 100)
    assert table().map_batches(corrupt_value(good), 0, BIG, 1, 100) == (len(good), -1, 0,
                                                                      WALK_END)


def filtered(offsets: rs.KeyOffsetTable, chunk: bytes, *, latest: int = 100, now_ms: int = TS,
             upper_bound: int = 1000, checked: tuple[int, int] = (0, -1)
             ) -> tuple[int, list[tuple[int, int]], tuple[int, int, int, int]]:
    return offsets.filter_batches(chunk, 0, BIG, latest, now_ms, upper_bound, *checked)


@pytest.mark.parametrize("table", TABLES)
def test_filter_batches_keeps_whole_drops_and_leaves_the_rest_to_the_caller(table) -> None:  # type: ignore
    offsets = table(3)
    offsets.map_records(batch(0, [b"a", b"b", b"c"])[HEADER_SIZE:], 3, 10, 0)  # at 10..12
    dropped = batch(0, [b"a", b"b"])
    kept = batch(10, [b"a", b"b"])
    superseded = batch(2, [b"c"], producer_id=7, producer_epoch=0, base_sequence=0)
    rebuilt = batch(11, [b"b", b"c"], values=[b"v", None])
    chunk = dropped + kept + superseded + kept
    assert filtered(offsets, chunk) == (
        len(dropped + kept + superseded),
        [(len(dropped), KEEP), (len(dropped + kept), BY_CALLER)], (4, len(dropped + kept), 2,
                                                                   len(kept)))
    assert filtered(offsets, rebuilt) == (len(rebuilt), [(0, BY_CALLER)], (0, 0, 0, 0))
    assert filtered(offsets, with_delete_horizon(rebuilt), now_ms=TS - 1)[1] == [(0, KEEP)]
    assert filtered(offsets, with_delete_horizon(rebuilt))[1] == [(0, BY_CALLER)]
    for other in (batch(10, [b"a"], is_control=True), build_batch([], base_offset=10),
                  batch(10, [b"a"], compression=Compression.GZIP)):
        assert filtered(offsets, other)[1] == [(0, BY_CALLER)]
    assert filtered(offsets, kept, upper_bound=12)[1] == [(0, BY_CALLER)]
    assert filtered(offsets, kept, latest=5)[1] == [(0, KEEP)]


@pytest.mark.parametrize("table", TABLES)
def test_filter_batches_checks_the_crc_of_what_the_map_did_not(table) -> None:  # type: ignore
    offsets = table(4)
    offsets.put(b"a", 50)
    bad_kept, bad_dropped = corrupt_value(batch(60, [b"a"])), corrupt_value(batch(0, [b"a"]))
    for bad in (bad_kept, bad_dropped):
        with pytest.raises(CorruptRecordError, match="CRC mismatch"):
            filtered(offsets, bad)
    assert filtered(offsets, bad_kept, checked=(60, 60))[1] == [(0, KEEP)]
    assert filtered(offsets, bad_dropped, checked=(0, 0))[1] == []
    torn = bytearray(batch(0, [b"a"]))
    torn[HEADER_SIZE] = 0x7F  # the record's length: past the section
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        filtered(offsets, bytes(torn), checked=(0, 0))


@pytest.mark.parametrize("whole", [whole_batches, rs.whole_batches])
def test_whole_batches_is_the_prefix_of_complete_batches(whole: Callable[[bytes], int]) -> None:
    one, two = batch(0, [b"a"]), batch(1, [b"b", b"c"])
    assert whole(one + two) == len(one + two)
    assert whole(one + two[:-1]) == whole(one + two[:11]) == len(one)
    assert whole(b"") == whole(one[:HEADER_SIZE - 1]) == 0


@st.composite
def chunks(draw: st.DrawFn) -> tuple[bytes, set[bytes]]:
    """A few batches of varied kinds (with or without producer ids, control, compressed, last
    offsets past 64 bits), and their keys."""
    out, base, keys = b"", draw(st.sampled_from([0, 5, 2**63 - 30])), set()
    for _ in range(draw(st.integers(1, 4))):
        records = draw(record_lists(max_size=6, base_offset=base))
        options = draw(st.fixed_dictionaries({
            "producer_id": st.sampled_from([-1, 9]), "is_control": st.booleans(),
            "compression": st.sampled_from([Compression.NONE] * 4 + [Compression.GZIP])}))
        try:
            out += build_batch(records, base_offset=base, **options)
        except ValueError:  # a delta past 32 bits
            break
        keys.update(r.key for r in records if r.key is not None)
        base = (records[-1].offset if records else base) + 1
    return out, keys


def fix_crcs(data: bytes) -> bytes:
    """Rewrite the CRC of every batch whose length field still fits, so a mutation reaches the
    record walks instead of failing the CRC check."""
    out, pos = bytearray(data), 0
    while (size := peek_size(out, pos)) is not None and HEADER_SIZE <= size <= len(out) - pos:
        write_crc(out, pos, size)
        pos += size
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_native_and_python_agree_on_mutated_chunks(data: st.DataObject) -> None:
    chunk, keys = data.draw(chunks())
    mutated = apply(chunk, data.draw(mutations(len(chunk))))
    if data.draw(st.booleans()):
        mutated = fix_crcs(mutated)
    assert rs.whole_batches(mutated) == whole_batches(mutated)
    first = read_header(chunk).base_offset
    start = first + data.draw(st.integers(0, 8))
    room = data.draw(st.integers(0, 20))
    tables = rs.NativeKeyOffsets(5), rs.PyKeyOffsets(5)
    mapped = [outcome(lambda t=t: t.map_batches(mutated, 0, BIG, start, room)) for t in tables]
    assert mapped[0] == mapped[1]
    assert len(tables[0]) == len(tables[1])
    assert [tables[0].get(k) for k in keys] == [tables[1].get(k) for k in keys]

    def near_first(most: int) -> int:
        return data.draw(st.integers(first - 1, min(first + most, 2**63 - 1)))

    args = (near_first(10), TS, near_first(40), first, near_first(10))
    pos = 0
    for _ in range(8):  # as the cleaner steps through a chunk
        steps = [outcome(lambda t=t, p=pos: t.filter_batches(mutated, p, p + 100, *args))
                 for t in tables]
        assert steps[0] == steps[1]
        if steps[0] is CorruptRecordError:
            break
        pos = steps[0][0]  # type: ignore[index]
