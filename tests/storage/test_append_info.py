from __future__ import annotations

import pytest

from spark_log.storage.append_info import AppendInfo, AppendOrigin


def test_origins_are_kafkas_three() -> None:
    assert {o.name for o in AppendOrigin} == {"CLIENT", "COORDINATOR", "REPLICATION"}


def test_append_info_is_immutable() -> None:
    info = AppendInfo(first_offset=0, last_offset=2, max_timestamp=5,
                      offset_of_max_timestamp=2, log_append_time=-1, log_start_offset=0,
                      batch_count=1, record_count=3, size_bytes=100)
    with pytest.raises(AttributeError):
        info.first_offset = 1  # type: ignore[misc]
    assert info._replace(first_offset=1).first_offset == 1 and info.first_offset == 0
