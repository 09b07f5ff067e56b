"""Fixtures for the cleaner tests: `key_offsets` runs a test once with each offset-map table,
the native one (which the install builds: its absence fails) and the pure-Python one."""

from __future__ import annotations

import pytest

from spark_log.records import record_scan
from spark_log.storage.cleaner import cleaner_offset_map


@pytest.fixture(params=["native", "python"])
def key_offsets(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    table = record_scan.NativeKeyOffsets if request.param == "native" else \
        record_scan.PyKeyOffsets
    if table is None:
        pytest.fail("the native extension is not built: `pip install -e .` compiles it")
    monkeypatch.setattr(cleaner_offset_map, "KeyOffsets", table)
