"""Start-up: ``dataclasses`` without the ``inspect`` module it imports and memex never makes it use.

A cron poll with nothing new is mostly interpreter start-up and imports. The standard library's
``dataclasses`` imports ``inspect`` (with ``ast``, ``dis``, ``tokenize``: about an eighth of an idle poll)
only to write a signature as the docstring of a dataclass that has none; every memex dataclass has one.
So ``dataclasses`` is imported with a stand-in for ``inspect`` that imports the real module on first use,
and the stand-in is removed again at once: any other ``import inspect`` gets the real module. Does nothing
when either module is already imported (then nothing is saved and nothing changes).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _OnFirstUse(types.ModuleType):
    """A module's stand-in in one importer's globals: the first attribute read imports the real module."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self.__name__), name)


def import_dataclasses_without_inspect() -> None:
    """Import ``dataclasses`` with ``inspect`` deferred to its first use (see the module's docstring)."""
    if "dataclasses" in sys.modules or "inspect" in sys.modules:
        return
    stand_in = _OnFirstUse("inspect")
    sys.modules["inspect"] = stand_in
    try:
        import dataclasses  # noqa: F401
    finally:
        if sys.modules.get("inspect") is stand_in:
            del sys.modules["inspect"]
