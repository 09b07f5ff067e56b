"""How commands print: tables, JSON, notices and progress bars.

On a terminal tables are rich tables and long work shows a progress bar on stderr; when stdout
is a pipe or a file, tables are plain whitespace-aligned columns under an upper-case header
line (as Kafka's tools print them, so `awk` and `grep` keep working) and no progress bar is
drawn. `--json` output is always one JSON document (or one per line for record streams).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

Cell = str | int | float | None


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def format_cell(value: Cell) -> str:
    return "-" if value is None or value == "" else str(value)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Cell]],
                title: str | None = None) -> None:
    """A table of `rows` under `headers`; None cells print as '-'."""
    console = _console()
    cells = [[format_cell(v) for v in row] for row in rows]
    if console.is_terminal:
        table = Table(title=title, title_justify="left", header_style="bold", show_edge=False,
                      pad_edge=False)
        for header in headers:  # headers stay whole; long values fold onto more lines
            table.add_column(header, min_width=len(header), overflow="fold")
        for row in cells:
            table.add_row(*row)
        console.print(table)
        return
    if title:
        print(title)
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    for row in [list(headers), *cells]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def print_json(value: Any) -> None:
    print(json.dumps(value, default=str), flush=True)


def print_lines(lines: Sequence[str]) -> None:
    for line in lines:
        print(line)


def notice(message: str) -> None:
    """A line for the person at the terminal, on stderr (never mixed into data on stdout)."""
    print(message, file=sys.stderr, flush=True)


def print_key_values(pairs: Sequence[tuple[str, Cell]]) -> None:
    """`Key: value` lines (aligned on a terminal)."""
    console = _console()
    width = max((len(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        if console.is_terminal:
            console.print(f"[bold]{key + ':':<{width + 1}}[/bold] {format_cell(value)}")
        else:
            print(f"{key}: {format_cell(value)}")


class Tracker(Protocol):
    def advance(self, amount: float = 1) -> None: ...

    def update_total(self, total: float | None) -> None: ...


class _NoProgress:
    def advance(self, amount: float = 1) -> None:
        pass

    def update_total(self, total: float | None) -> None:
        pass


class _BarProgress:
    def __init__(self, progress: Progress, task: Any) -> None:
        self._progress, self._task = progress, task

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self._task, amount)

    def update_total(self, total: float | None) -> None:
        self._progress.update(self._task, total=total)


@contextmanager
def progress(description: str, total: float | None = None) -> Iterator[Tracker]:
    """A transient progress bar on stderr when it is a terminal; a no-op otherwise."""
    console = _console(stderr=True)
    if not console.is_terminal:
        yield _NoProgress()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        yield _BarProgress(bar, bar.add_task(description, total=total))
