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


def test_a_step_is_named_only_when_it_fails() -> None:
    failure = LogDirFailure("/data")

    class Named:  # counts how often the step's name is formatted
        formatted = 0

        def __str__(self) -> str:
            Named.formatted += 1
            return "t-0"

    with failure.guard("reading %s", Named()):
        pass
    assert failure.run("listing %s", Named(), sorted, [2, 1]) == [1, 2]
    assert Named.formatted == 0

    def broken() -> None:
        raise OSError(errno.EIO, "disk gone")

    with pytest.raises(KafkaStorageError, match=r"error while listing t-0: .*disk gone"):
        failure.run("listing %s", Named(), broken)
    assert failure.failed and Named.formatted == 1
    with pytest.raises(KafkaStorageError, match="offline"):
        failure.run("listing %s", Named(), sorted, [2, 1])
    with pytest.raises(KafkaStorageError, match="error while reading t-0"), \
            LogDirFailure("/other").guard("reading %s", Named()):
        raise OSError(errno.EIO, "disk gone")
