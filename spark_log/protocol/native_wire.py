"""The protocol's optional native module, `_native_wire`: request headers, Produce and Fetch
bodies read and the usual Fetch response written in one C call each (its sources say how). None
where it was not built (no compiler where spark_log was installed); each module that uses it
then runs its pure-Python twin alone, which defines the behaviour in any case.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["NATIVE_WIRE"]


def _load() -> ModuleType | None:
    try:  # by name: import-linter reads only Python sources and would misplace the compiled module
        return importlib.import_module(f"{__package__}._native_wire")
    except ImportError:
        return None


NATIVE_WIRE = _load()
