"""The quorum under the deterministic simulator: 1,000 seeds of dropped, delayed, duplicated and
reordered messages, cut links, crashes that keep only what was durable (or what the page cache
kept), leaders resigning — and Raft's promises checked throughout (see `simulation`).

A failure names its seed; replay it with
`.venv/bin/python -m tests.raft.simulation --seed N --trace`. The long run (100,000 seeds) is a
documented command, not part of the suite.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests import seeded_runs
from tests.raft.simulation import Faults, Simulation, run_seed

SEEDS = 1000
CHUNKS = 8


def violations(seeds: range) -> list[str]:
    return seeded_runs.violations(run_seed, seeds)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_a_thousand_seeds_keep_every_promise(chunk: int) -> None:
    seeded_runs.check_seeds(run_seed, range(chunk, SEEDS, CHUNKS), "tests.raft.simulation")


@pytest.mark.parametrize("seed", [55201, 55753, 86866])
def test_seeds_the_long_run_found_keep_every_promise(seed: int) -> None:
    """55201, 55753: with snapshots handed back late, a replica that learned its leader from a
    fetch answer sent its next fetch before appending that answer; the leader, having
    snapshotted past the stale offset meanwhile, named a snapshot below the replica's high
    watermark. 86866: the simulator's own network delivered a leader's late answer to a
    follower's previous instance to the restarted one, which reused its correlation ids."""
    assert violations(range(seed, seed + 1)) == []


def test_a_seed_replays_exactly() -> None:
    first, second = run_seed(17), run_seed(17)
    assert first.checker.committed == second.checker.committed
    assert first.checker.leaders == second.checker.leaders and first._seq == second._seq


def test_the_simulation_exercises_the_protocol() -> None:
    """The faults really happen: elections, crashes with and without power loss, truncations
    of diverged logs, and snapshots fetched by replicas that fell behind; and every seed ends
    with a follower restarted in a calm quorum."""
    total: Counter[str] = Counter()
    elections = 0
    for seed in range(40):
        sim = Simulation(seed, voters=3, observers=1)
        sim.run()
        total += sim.stats
        elections += len(sim.checker.leaders)
    assert elections > 80, elections
    assert total["calm restart"] == 40, total  # every seed has followers to restart
    for what in ("crash", "power loss", "TruncateLog", "InstallSnapshot", "SaveSnapshot"):
        assert total[what] > 5, (what, total)


def test_a_quorum_without_faults_commits_everything_proposed() -> None:
    sim = Simulation(5, voters=3, observers=1, faults=Faults(0, 0, 0, 0, 0, 0, 0, 0))
    sim.run()
    proposed = sim.proposed
    applied = {len(app.applied) for app in sim.apps.values()}
    # all replicas agree, and only the last proposal may still be on its way
    assert proposed > 150 and len(applied) == 1 and proposed - 1 <= applied.pop() <= proposed
    assert len(sim.checker.leaders) == 1


def test_the_checker_catches_a_broken_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica that votes twice in an epoch is caught: the checker is not blind."""
    from spark_log.raft import replica_handlers
    from spark_log.raft.quorum_state import Unattached

    original = replica_handlers.ReplicaHandlers._on_vote_request

    def forgetful(self, m, req, now):  # type: ignore[no-untyped-def]
        if isinstance(self.state, Unattached):
            self.state.voted_id = -1  # forget the vote already cast in this epoch
        return original(self, m, req, now)

    monkeypatch.setattr(replica_handlers.ReplicaHandlers, "_on_vote_request", forgetful)
    caught = violations(range(300))
    assert any("two leaders" in c for c in caught), caught[:3]


def test_the_checker_catches_a_leader_without_committed_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Voters that ignore the candidate's log (Raft's election restriction broken) elect
    leaders that lack committed records: leader completeness is checked, not assumed."""
    import dataclasses

    from spark_log.raft import replica_handlers

    original = replica_handlers.ReplicaHandlers._on_vote_request

    def careless(self, m, req, now):  # type: ignore[no-untyped-def]
        boasted = dataclasses.replace(req, last_epoch=req.candidate_epoch - 1,
                                      last_offset=1 << 40)  # every log looks long enough
        return original(self, m, boasted, now)

    monkeypatch.setattr(replica_handlers.ReplicaHandlers, "_on_vote_request", careless)
    caught = violations(range(100))
    assert any("lacks committed offset" in c for c in caught), caught[:3]
