"""Shared fixtures: a real broker process per test (or per module) on a loopback port; the order
in which `./dev test` runs tests in parallel (pytest-xdist)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess


def _uses_spark(item: pytest.Item) -> bool:
    return item.get_closest_marker("spark") is not None or \
        "spark" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Spark tests run first and one after another in one worker (xdist group "spark"): one
    Spark driver at a time leaves the 2 cores the rest of the suite shares with it enough room
    (PySpark gives a Python worker a fixed 10 s to connect back to its JVM). The other tests
    spread over the remaining workers meanwhile."""
    spark = [item for item in items if _uses_spark(item)]
    for item in spark:
        item.add_marker(pytest.mark.xdist_group("spark"))
    chosen = set(map(id, spark))
    items[:] = spark + [item for item in items if id(item) not in chosen]


def _start(tmp: Path, config: dict[str, str] | None = None) -> BrokerProcess:
    return BrokerProcess(tmp / "data", tmp / "broker.log", config).start()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh broker for one test; its log is printed if the test fails."""
    proc = _start(tmp_path)
    yield proc
    code = proc.stop()
    assert code == 0, f"broker did not shut down cleanly ({code}):\n{proc.log()}"


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for a whole test module (tests use distinct topic names)."""
    proc = _start(tmp_path_factory.mktemp("broker"))
    yield proc
    proc.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator:
    """Start brokers with custom configs; all are stopped at the end."""
    started: list[BrokerProcess] = []

    def make(config: dict[str, str] | None = None, name: str = "b") -> BrokerProcess:
        proc = _start(tmp_path / name, config)
        started.append(proc)
        return proc

    yield make
    for proc in started:
        proc.stop()
