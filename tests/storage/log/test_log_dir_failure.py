from __future__ import annotations

import errno
import logging

import pytest

from spark_log.storage.errors import KafkaStorageError
from spark_log.storage.log.log_dir_failure import LogDirFailure


def test_an_os_error_fails_the_directory_for_good(caplog: pytest.LogCaptureFixture) -> None:
    failure = LogDirFailure("/data")
    with caplog.at_level(logging.ERROR), pytest.raises(KafkaStorageError, match="fsyncing x"), \
            failure.guard("fsyncing x"):
        raise OSError(errno.EIO, "disk gone")
    assert failure.failed
    assert "Log directory /data is offline" in caplog.text
    ran = []
    with pytest.raises(KafkaStorageError, match="offline"), failure.guard("anything"):
        ran.append(1)
    assert ran == []


def test_other_exceptions_pass_through_without_failing() -> None:
    failure = LogDirFailure("/data")
    with pytest.raises(ValueError), failure.guard("parsing"):
        raise ValueError("bad input")
    assert not failure.failed
    failure.check()


def test_first_failure_is_kept() -> None:
    failure = LogDirFailure("/data")
    first = failure.fail("one", OSError("a"))
    failure.fail("two", OSError("b"))
    assert failure.error is first
