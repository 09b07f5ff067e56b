"""Running a deterministic simulator over many seeds: the seeds whose run a checker rejected
(for the tests) and the command line of the long runs. A run is rejected when it raises an
AssertionError — a simulator's Violation, or a safety check of the code under test."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import Any

RunSeed = Callable[..., Any]


def failure(run_seed: RunSeed, seed: int, **options: Any) -> str | None:
    """Why the run of `seed` broke a promise, or None if it kept them all."""
    try:
        run_seed(seed, **options)
    except AssertionError as e:
        return str(e)
    return None


def violations(run_seed: RunSeed, seeds: Iterable[int]) -> list[str]:
    """'seed N: why' for each of `seeds` whose run broke a promise."""
    return [f"seed {seed}: {why}" for seed in seeds
            if (why := failure(run_seed, seed)) is not None]


def check_seeds(run_seed: RunSeed, seeds: Iterable[int], module: str) -> None:
    """Fail with every rejected seed and the command that replays one."""
    failed = violations(run_seed, seeds)
    assert not failed, "\n".join(failed) + \
        f"\nreplay: .venv/bin/python -m {module} --seed N --trace"


def main(run_seed: RunSeed, description: str, argv: list[str] | None = None) -> int:
    """`--seed N [--trace]` or `--seeds FROM:TO`: run them, print each failure and a count
    every 1,000 seeds; exit 1 if any failed."""
    parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="run one seed")
    parser.add_argument("--seeds", default="0:1000", help="a range FROM:TO of seeds")
    parser.add_argument("--trace", action="store_true", help="print what happens (one seed)")
    args = parser.parse_args(argv)
    first, last = (args.seed, args.seed + 1) if args.seed is not None else \
        map(int, args.seeds.split(":"))
    failures = 0
    for seed in range(first, last):
        why = failure(run_seed, seed, trace=args.trace)
        if why is not None:
            failures += 1
            print(f"seed {seed} FAILED: {why}", flush=True)
        if (seed - first + 1) % 1000 == 0:
            print(f"{seed - first + 1} seeds run, {failures} failed", flush=True)
    print(f"{last - first} seeds run, {failures} failed")
    return 1 if failures else 0
