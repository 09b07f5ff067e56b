"""Replication under the deterministic simulator: 1,000 seeds of crashes, restarts, dropped,
delayed and reordered messages and cut links over one partition on three brokers, with the
real leader state machine and truncation rule — and the promises checked throughout (see
`simulation`). A failure names its seed; replay it with
`.venv/bin/python -m tests.replication.simulation --seed N --trace`. The long run (100,000
seeds) is a documented command, not part of the suite.
"""

from __future__ import annotations

from collections import Counter

import pytest

from spark_log.replication import leader_partition
from tests import seeded_runs
from tests.replication.simulation import Simulation, run_seed

SEEDS = 1000
CHUNKS = 4


def violations(seeds: range) -> list[str]:
    return seeded_runs.violations(run_seed, seeds)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_a_thousand_seeds_keep_every_promise(chunk: int) -> None:
    seeded_runs.check_seeds(run_seed, range(chunk, SEEDS, CHUNKS), "tests.replication.simulation")


def test_a_seed_replays_exactly() -> None:
    first, second = run_seed(17), run_seed(17)
    assert first.acked == second.acked and first.committed == second.committed
    assert first.stats == second.stats and first.seq == second.seq


def test_the_simulation_exercises_replication() -> None:
    """The faults really happen: crashes, elections, truncations of diverged logs, ISR
    shrinks and expansions, and acks=all refused below min.insync.replicas."""
    total: Counter[str] = Counter()
    acked = 0
    for seed in range(40):
        sim = Simulation(seed).run()
        total += sim.stats
        acked += len(sim.acked)
    assert acked > 40 * 50
    for what in ("crashes", "elections", "truncations", "isr shrinks", "isr expansions",
                 "not_enough_replicas"):
        assert total[what] > 10, (what, total)


def test_the_checker_catches_a_leader_that_commits_alone(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A leader whose high watermark ignores its followers acknowledges records only it has:
    a failover loses them, and the checker says so."""
    def alone(self: leader_partition.LeaderPartition) -> bool:
        moved = self.log_end_offset > self.high_watermark
        self.high_watermark = self.log_end_offset
        return moved

    monkeypatch.setattr(leader_partition.LeaderPartition, "_advance_high_watermark", alone)
    caught = violations(range(100))
    assert any("lacks acknowledged" in c or "lacks committed" in c for c in caught), caught[:3]


def test_the_checker_catches_a_follower_that_never_truncates(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower that keeps its diverged tail ends with a log the others do not have."""
    from spark_log.replication.truncation import Truncation
    from tests.replication import simulation

    monkeypatch.setattr(simulation, "truncation",
                        lambda follower, end, *_: Truncation(end, True))
    caught = violations(range(100))
    assert caught, "a follower keeping a diverged log went unnoticed"
