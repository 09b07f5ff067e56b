"""What `dump-log --verify` found: problems (a broker start would refuse or lose data) and notes
(leftovers a start finishes), each naming its file, in the order found.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

MAX_LISTED_PER_FILE = 20


@dataclass(frozen=True)
class Finding:
    path: str
    text: str
    problem: bool  # False: a note


class Report:
    """What one verification found, in the order found, and what it read.

    Invariants: `problems` and `notes` count every finding; at most MAX_LISTED_PER_FILE of
    each kind are kept per path in `findings` (one damaged segment can hold millions of bad
    batches), the rest only counted in `_unlisted`."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.findings: list[Finding] = []
        self.problems = self.notes = 0
        self.partitions = self.segments = self.batches = 0
        self.broker_running = False
        self._per_path: Counter[tuple[str, bool]] = Counter()
        self._unlisted: Counter[tuple[str, bool]] = Counter()

    def problem(self, path: Path, text: str) -> None:
        self.problems += 1
        self._add(Finding(str(path), text, True))

    def note(self, path: Path, text: str) -> None:
        self.notes += 1
        self._add(Finding(str(path), text, False))

    def _add(self, finding: Finding) -> None:
        key = (finding.path, finding.problem)
        self._per_path[key] += 1
        if self._per_path[key] > MAX_LISTED_PER_FILE:
            self._unlisted[key] += 1
        else:
            self.findings.append(finding)

    def listed(self) -> list[Finding]:
        """The findings kept, then one line per path saying how many more it had."""
        more = [Finding(path, f"{n} more {'problem' if problem else 'note'}(s) not listed",
                        problem) for (path, problem), n in self._unlisted.items()]
        return self.findings + more


def without_path(text: str, path: Path) -> str:
    """A parser's message about a file without the file's path (the report's line starts with
    it); a line number it gave stays."""
    text = re.sub(re.escape(str(path)) + r":(\d+):", r"line \1:", text)
    return text.replace(f"{path}: ", "").replace(f" ({path}: ", " (")
