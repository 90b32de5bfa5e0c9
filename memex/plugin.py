"""Everything a source plug-in needs, from one module: ``from memex.plugin import Batch, Item, Message, ...``.

A plug-in is a package that registers ``make(source: SourceConfig) -> Poller`` under the ``memex.pollers`` entry
point. The names here are memex's public interface for it: they keep their meaning within a major version, and
``memex`` ships ``py.typed`` so mypy checks a plug-in against them. The guide is docs/plugins.md; the conformance
kit a plug-in's own tests can run is :mod:`memex.conformance`.

Importing this module costs what the poll path already imports (no I/O, no third-party package), so a plug-in that
imports it at its top keeps an idle poll lean.
"""

from __future__ import annotations

from memex.config import Config, Keys, SourceConfig, load
from memex.deadline import Deadline, Interrupted
from memex.errors import AuthRequired, ConfigError, MemexError, SourceError, SourceMissing
from memex.records import Attachment, Conversation, Message, Revision, Sender, rfc3339
from memex.source import (
    Batch,
    Cursor,
    DeadlineAware,
    Failure,
    HistoryPoller,
    Interruptible,
    Inventoried,
    Item,
    Listed,
    MovesWhenIdle,
    Poller,
    PollerFactory,
    Settling,
    Spooling,
    Unchecked,
    Watchable,
)
from memex.store.attachments import Content

__all__ = [
    "Attachment",
    "AuthRequired",
    "Batch",
    "Config",
    "ConfigError",
    "Content",
    "Conversation",
    "Cursor",
    "Deadline",
    "DeadlineAware",
    "Failure",
    "HistoryPoller",
    "Interrupted",
    "Interruptible",
    "Inventoried",
    "Item",
    "Keys",
    "Listed",
    "MemexError",
    "Message",
    "MovesWhenIdle",
    "Poller",
    "PollerFactory",
    "Revision",
    "Sender",
    "Settling",
    "SourceConfig",
    "SourceError",
    "SourceMissing",
    "Spooling",
    "Unchecked",
    "Watchable",
    "load",
    "rfc3339",
]
