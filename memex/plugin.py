"""Everything a source plug-in needs, from one module: ``from memex.plugin import Batch, Item, Message, ...``.

A plug-in is a package that registers ``make(source: SourceConfig) -> Poller`` under the ``memex.pollers`` entry
point. The names here are memex's public interface for it: they keep their meaning within a major version, and
``memex`` ships ``py.typed`` so mypy checks a plug-in against them. The guide is docs/plugins.md; the conformance
kit a plug-in's own tests can run is :mod:`memex.conformance`. memex's own sources import from here too, and from
nowhere else in memex (tests/core/test_layers.py checks it).

Importing this module costs what the poll path already imports (no I/O, no third-party package), so a plug-in that
imports it at its top keeps an idle poll lean. The helpers only some sources need (the spool, the OAuth logins, the
secret commands, private files, the collision fingerprint, HTTP) are loaded when first used (``__getattr__`` below).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memex.capabilities import (
    Authenticating,
    CursorValidating,
    DeadlineAware,
    Headed,
    Historied,
    HistoryCounting,
    HistoryPoller,
    Interruptible,
    Inventoried,
    MovesWhenIdle,
    Paced,
    Pushing,
    Reporting,
    Settling,
    Spooling,
    Watchable,
    WholeRevisions,
)
from memex.config import Config, Keys, SourceConfig, load
from memex.deadline import NEVER, Deadline, Interrupted
from memex.errors import AuthRequired, ConfigError, MemexError, SourceError, SourceMissing, describe_exc
from memex.records import Attachment, Conversation, Message, Revision, Sender, rfc3339
from memex.source import Batch, Cursor, Failure, Item, Listed, Poller, PollerFactory, Unchecked
from memex.store.attachments import Content

if TYPE_CHECKING:
    from memex import http_client
    from memex.oauth.installed_app import AppSettings, InstalledApp
    from memex.oauth.microsoft import DEFAULT_AUTHORITY, AuthSettings, Login, cache_path
    from memex.oauth.secret_cmd import TOKEN_CMD_TIMEOUT, password, run_token_cmd
    from memex.push import Link, Listener, backoff
    from memex.state.files import atomic_replace, ensure_private_dir
    from memex.state.spool import Claim, Entry, Spool
    from memex.store.collisions import fingerprint

# Loaded on first use: name -> the module that holds it (each costs imports an idle poll must not pay).
_LAZY: dict[str, str] = {
    "AppSettings": "memex.oauth.installed_app",
    "InstalledApp": "memex.oauth.installed_app",
    "AuthSettings": "memex.oauth.microsoft",
    "DEFAULT_AUTHORITY": "memex.oauth.microsoft",
    "Login": "memex.oauth.microsoft",
    "cache_path": "memex.oauth.microsoft",
    "TOKEN_CMD_TIMEOUT": "memex.oauth.secret_cmd",
    "password": "memex.oauth.secret_cmd",
    "run_token_cmd": "memex.oauth.secret_cmd",
    "atomic_replace": "memex.state.files",
    "ensure_private_dir": "memex.state.files",
    "Claim": "memex.state.spool",
    "Entry": "memex.state.spool",
    "Spool": "memex.state.spool",
    "fingerprint": "memex.store.collisions",
    "http_client": "memex.http_client",
    "Link": "memex.push",
    "Listener": "memex.push",
    "backoff": "memex.push",  # the module: session(), post(), unreachable(), retry_delay()
}


def __getattr__(name: str) -> Any:
    """A helper of :data:`_LAZY`, imported the first time a source asks for it."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    loaded = importlib.import_module(module)
    value = loaded if module.endswith("." + name) else getattr(loaded, name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_AUTHORITY",
    "NEVER",
    "TOKEN_CMD_TIMEOUT",
    "AppSettings",
    "Attachment",
    "AuthRequired",
    "AuthSettings",
    "Authenticating",
    "Batch",
    "Claim",
    "Config",
    "ConfigError",
    "Content",
    "Conversation",
    "Cursor",
    "CursorValidating",
    "Deadline",
    "DeadlineAware",
    "Entry",
    "Failure",
    "Headed",
    "Historied",
    "HistoryCounting",
    "HistoryPoller",
    "InstalledApp",
    "Interrupted",
    "Interruptible",
    "Inventoried",
    "Item",
    "Keys",
    "Link",
    "Listed",
    "Listener",
    "Login",
    "MemexError",
    "Message",
    "MovesWhenIdle",
    "Paced",
    "Poller",
    "PollerFactory",
    "Pushing",
    "Reporting",
    "Revision",
    "Sender",
    "Settling",
    "SourceConfig",
    "SourceError",
    "SourceMissing",
    "Spool",
    "Spooling",
    "Unchecked",
    "Watchable",
    "WholeRevisions",
    "atomic_replace",
    "backoff",
    "cache_path",
    "describe_exc",
    "ensure_private_dir",
    "fingerprint",
    "http_client",
    "load",
    "password",
    "rfc3339",
    "run_token_cmd",
]
