"""Shared fixtures: a real broker process per test (or per module) on a loopback port; the
`spark` mark that `./dev test` runs apart from the other tests (one Spark driver at a time)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test using the session's Spark must be marked `spark`: `./dev test` runs the others
    in parallel workers, where a second Spark driver would crowd the machine."""
    unmarked = [item.nodeid for item in items if "spark" in getattr(item, "fixturenames", ())
                and item.get_closest_marker("spark") is None]
    if unmarked:
        raise pytest.UsageError(f"tests use the spark fixture without the spark mark: "
                                f"{', '.join(unmarked)}")


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
