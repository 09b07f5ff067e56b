"""The cleaner's per-record walks of `record_scan`, each test run against the native
implementation (which the install builds: its absence fails here) and the pure-Python one: the
key -> latest offset table, the filter's kept records, and that both agree on every mutated
section (the same result, or CorruptRecordError from both)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.records import CorruptRecordError, Record, build_batch
from spark_log.records import record_scan as rs
from spark_log.records.batch_rewrite import scan_record_spans
from spark_log.records.record_batch import BatchView

from .strategies import record_lists
from .test_record_batch_fuzz import apply, mutations

TS = 1_700_000_000_000
TABLES = [pytest.param(rs.NativeKeyOffsets, id="native"),
          pytest.param(rs.PyKeyOffsets, id="python")]


def test_the_install_built_the_extension() -> None:
    assert rs.NATIVE, ("spark_log/records/_native_scan.c is not built: `pip install -e .` (what "
                       "./dev runs) compiles it; it needs a C compiler and Python's headers")


def section_of(records: list[Record], base_offset: int = 0) -> memoryview:
    return BatchView(build_batch(records, base_offset=base_offset)).records_buffer()  # type: ignore


@pytest.mark.parametrize("table", TABLES)
def test_map_records_keeps_the_last_offset_per_key_from_the_start(table) -> None:  # type: ignore
    records = [Record(50 + i, TS, b"k%d" % (i % 3), b"v") for i in range(10)]
    records.append(Record(60, TS, None, b"no key"))
    offsets = table(7)
    offsets.put(b"old", 1)
    offsets.map_records(section_of(records, 50), 11, 50, 52)
    assert len(offsets) == 4
    assert [offsets.get(k) for k in (b"old", b"k0", b"k1", b"k2")] == [1, 59, 57, 58]
    assert offsets.get(b"absent") == -1 and offsets.get(b"absent", 5) == 5
    offsets.clear()
    assert len(offsets) == 0 and offsets.get(b"k0") == -1


@pytest.mark.parametrize("table", TABLES)
def test_many_keys_of_any_length_stay_exact(table) -> None:  # type: ignore
    offsets = table(1)
    keys = [b"", *(b"key-%d" % i for i in range(5000)), b"x" * 100_000, b"x" * 99_999]
    for offset, key in enumerate(keys):
        offsets.put(key, offset)
    offsets.put(b"key-7", 10**12)
    assert len(offsets) == len(keys)
    assert [offsets.get(k) for k in keys] == [
        10**12 if k == b"key-7" else i for i, k in enumerate(keys)]
    assert offsets.get(b"x" * 99_998) == -1


@pytest.mark.parametrize("table", TABLES)
def test_kept_records_are_those_still_latest_past_the_map_or_unmapped(table) -> None:  # type: ignore
    records = [Record(100, TS, b"a", b"old"), Record(101, TS, b"b", None),
               Record(102, TS, None, b"no key"), Record(103, TS, b"a", b"new"),
               Record(104, TS, b"unmapped", None), Record(105, TS, b"a", b"later")]
    section = section_of(records, 100)
    offsets = table(3)
    offsets.map_records(section_of(records[:4], 100), 4, 100, 0)
    kept, tombstones = offsets.kept_records(section, 6, 100, 105, True)
    assert [span[0] for span in kept] == [101, 103, 104, 105] and tombstones
    assert kept == [s for s in scan_record_spans(bytes(section), 6, 100) if s[0] in (
        101, 103, 104, 105)]
    kept, tombstones = offsets.kept_records(section, 6, 100, 105, False)
    assert [span[0] for span in kept] == [103, 105] and not tombstones
    kept, tombstones = offsets.kept_records(section, 6, 100, 103, False)  # 104.. past the map
    assert [span[0] for span in kept] == [103, 104, 105] and tombstones
    one = section_of(records[3:4], 103)
    assert offsets.kept_records(one, 1, 103, 103, True) == (None, False)


@pytest.mark.parametrize("table", TABLES)
def test_a_section_that_does_not_match_its_count_is_refused(table) -> None:  # type: ignore
    section = bytes(section_of([Record(i, TS, b"k", b"v") for i in range(5)]))
    for data, count in ((section, 6), (section, 4), (section[:-3], 5), (b"", 1), (b"\x80", 1)):
        with pytest.raises(CorruptRecordError):
            table().map_records(data, count, 0, 0)
        with pytest.raises(CorruptRecordError):
            table().kept_records(data, count, 0, -1, True)


def outcome(walk: Callable[[], object]) -> object:
    try:
        return walk()
    except CorruptRecordError:
        return CorruptRecordError


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_native_and_python_agree_on_mutated_sections(data) -> None:  # type: ignore
    records = data.draw(record_lists(min_size=1, max_size=8))
    section = bytes(section_of(records, records[0].offset))
    mutated = apply(section, data.draw(mutations(len(section))))
    count, base = len(records), records[0].offset
    native, python = rs.NativeKeyOffsets(), rs.PyKeyOffsets()
    mapped = [outcome(lambda t=t: t.map_records(mutated, count, base, base + 1))
              for t in (native, python)]
    keys = {s[1] for s in scan_record_spans(section, count, base)} - {None}
    assert mapped[0] == mapped[1]
    assert [native.get(k) for k in keys] == [python.get(k) for k in keys]
    assert len(native) == len(python)
    assert outcome(lambda: native.kept_records(mutated, count, base, base + 2, False)) == \
        outcome(lambda: python.kept_records(mutated, count, base, base + 2, False))


def test_the_pure_python_walks_stand_in_when_the_extension_is_not_built() -> None:
    code = ("import sys; sys.modules['spark_log.records._native_scan'] = None\n"
            "from spark_log.records import record_scan as rs\n"
            "assert not rs.NATIVE and rs.KeyOffsets is rs.PyKeyOffsets\n"
            "assert rs.whole_batches is rs.batch_walk.whole_batches\n")
    subprocess.run([sys.executable, "-c", code], check=True)
