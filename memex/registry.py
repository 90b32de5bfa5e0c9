"""Finding a poller type by name: built-ins directly, others through entry points.

Built-in types are also declared in the ``memex.pollers`` entry-point group
(pyproject.toml); they are looked up here first so a cron poll does not pay
for scanning every installed distribution's metadata.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from memex.config import SourceConfig
from memex.errors import ConfigError
from memex.source import Poller, PollerFactory

ENTRY_POINT_GROUP = "memex.pollers"

BUILTIN: dict[str, str] = {
    "imessage": "pollers.imessage:make",
    "imap": "pollers.email:make",
    "maildir": "pollers.email:make",
    "mbox": "pollers.email:make",
    "messenger": "pollers.messenger:make",
    "teams": "pollers.teams:make",
    "signal": "pollers.signal:make",
}

# Source types that can generate sample data for ``memex demo``: ``sample(path, count) -> str`` (a line saying what it did).
SAMPLES: dict[str, str] = {"imessage": "pollers.imessage:sample"}


def _load(target: str) -> PollerFactory:
    module, _, attr = target.partition(":")
    factory: PollerFactory = getattr(importlib.import_module(module), attr)
    return factory


def factory_for(type_name: str) -> PollerFactory | None:
    """The factory registered for ``type_name``, or None."""
    if type_name in BUILTIN:
        return _load(BUILTIN[type_name])
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == type_name:
            factory: PollerFactory = ep.load()
            return factory
    return None


def sample_for(type_name: str) -> Callable[[Path, int], str] | None:
    """The sample-data hook of a source type (creates or extends a sample source at a path), or None."""
    target = SAMPLES.get(type_name)
    if target is None:
        return None
    module, _, attr = target.partition(":")
    hook: Callable[[Path, int], str] = getattr(importlib.import_module(module), attr)
    return hook


def known_types() -> list[str]:
    """Every type name available: built-ins and installed plugins."""
    from importlib.metadata import entry_points

    return sorted(set(BUILTIN) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


@contextmanager
def open_poller(source: SourceConfig) -> Iterator[Poller]:
    """Build the source's poller for a ``with`` block and close it afterwards.

    A failure to close is swallowed: it must not replace the run's own result or error.
    """
    poller = make_poller(source)
    try:
        yield poller
    finally:
        try:
            poller.close()
        except Exception:
            pass


def make_poller(source: SourceConfig) -> Poller:
    """Validate ``source`` with its type and build its poller (no I/O yet)."""
    factory = factory_for(source.type)
    if factory is None:
        raise ConfigError(
            f"unknown source type {source.type!r} (known: {', '.join(known_types())}); fix the type or install its plugin",
            path=source.path,
            key=f"sources.{source.name}.type",
        )
    return factory(source)
