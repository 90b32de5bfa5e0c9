"""Finding a poller type by name: built-ins directly, others through entry points.

The built-in types are declared here, in :data:`BUILTIN`, and only here: a cron poll of one finds it without
scanning any distribution's metadata. A plug-in's type is a ``memex.pollers`` entry point of its own package.
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

BUILTIN: dict[str, str] = {  # the one list of the built-in types (pyproject.toml declares no entry points for them)
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
    target = scan_entry_point(type_name)  # a plug-in's cron poll: found without importing importlib.metadata
    if target is not None:
        return _load(target)
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == type_name:
            factory: PollerFactory = ep.load()
            return factory
    return None


def scan_entry_point(type_name: str) -> str | None:
    """``module:attr`` of the ``memex.pollers`` entry point named ``type_name``, read from the ``entry_points.txt`` of
    the distributions in ``sys.path``'s folders, in path order (the order importlib.metadata finds them), or None.

    importlib.metadata gives the same answer but imports the email parser, zipfile and csv first, and was most of
    the 30 ms a plug-in's idle poll cost beyond a built-in's. Whatever this cannot read (a zipped distribution, a
    custom finder) is left to importlib.metadata, which :func:`factory_for` asks next.
    """
    import os
    import sys

    for folder in sys.path:
        try:
            entries = [e for e in os.scandir(folder or ".") if e.name.endswith((".dist-info", ".egg-info")) and e.is_dir()]
        except OSError:
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            try:
                with open(os.path.join(entry.path, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            section = ""
            for raw in text.splitlines():
                line = raw.strip()
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                elif section == ENTRY_POINT_GROUP and "=" in line:
                    name, _, value = line.partition("=")
                    if name.strip() == type_name:
                        return value.split("[", 1)[0].strip()  # "module:attr [extra]": the extras are not ours to check
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
    source.check()  # a broken common key (no type, interval = "sixty", ...) stops this source only
    factory = factory_for(source.type)
    if factory is None:
        raise ConfigError(
            f"unknown source type {source.type!r} (known: {', '.join(known_types())}); fix the type or install its plugin",
            path=source.path,
            key=f"sources.{source.name}.type",
        )
    return factory(source)
