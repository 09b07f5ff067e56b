"""Modules and functions small enough to read at once: a module under spark_log/ has at most
MAX_MODULE_LINES lines and a function at most MAX_FUNCTION_LINES, unless a `# Long: why`
comment says why it is longer (for a module among its first lines, for a function in the
comment just above its `def` or its first decorator)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "spark_log"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
MODULE_HEAD_LINES = 20
WHY = re.compile(r"^\s*# Long: \S")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def _comment_above(lines: list[str], lineno: int) -> list[str]:
    """The comment lines just above line `lineno` (1-based)."""
    above = []
    i = lineno - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        above.append(lines[i])
        i -= 1
    return above


def test_no_module_is_long_without_saying_why() -> None:
    long = []
    for path in _modules():
        lines = path.read_text().splitlines()
        excused = any(WHY.match(line) for line in lines[:MODULE_HEAD_LINES])
        if len(lines) > MAX_MODULE_LINES and not excused:
            long.append(f"{_name(path)}: {len(lines)} lines")
    assert not long, (f"modules over {MAX_MODULE_LINES} lines: split them by concept, or put "
                      f"a '# Long: why' comment in their first lines: {long}")


def test_no_function_is_long_without_saying_why() -> None:
    long = []
    for path in _modules():
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            excused = any(WHY.match(line) for line in _comment_above(lines, first))
            if length > MAX_FUNCTION_LINES and not excused:
                long.append(f"{_name(path)}:{node.lineno} {node.name}: {length} lines")
    assert not long, (f"functions over {MAX_FUNCTION_LINES} lines: split them, or put a "
                      f"'# Long: why' comment above it: {long}")
