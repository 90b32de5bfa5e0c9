"""What the live Signal poller (signal-cli) and the Signal Desktop history share: how a message is named.

Signal refers to a message by its author's service ID (ACI) and its sent timestamp in ms, in quotes,
reactions, edits and deletes; memex does the same, so a message read live and the same message read
later from Signal Desktop's database are one object, and their revisions one revision each.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memex.plugin import Revision, rfc3339


def native_id(author: str, sent_ms: int) -> str:
    """The native ID of a Signal message: ``<author ACI>:<sent ms>`` (never the phone number, never a local counter)."""
    return f"{author}:{int(sent_ms)}"


def sent_time(ms: int) -> str:
    """A Signal timestamp (ms since the epoch) as RFC 3339."""
    return rfc3339(datetime.fromtimestamp(int(ms) / 1000, UTC))


def edit_revision(edit_ms: int) -> Revision:
    """The revision an edit sent at ``edit_ms`` makes of its original."""
    return Revision(id=f"edit:{int(edit_ms)}", kind="edit", at=sent_time(edit_ms))


def delete_revision(delete_ms: int) -> Revision:
    """The tombstone a remote delete sent at ``delete_ms`` makes of its target."""
    return Revision(id=f"delete:{int(delete_ms)}", kind="delete", at=sent_time(delete_ms))


def reaction_revision(reactor: str, reaction_ms: int) -> Revision:
    """The revision a reaction by ``reactor`` sent at ``reaction_ms`` makes of its target."""
    return Revision(id=f"reaction:{reactor}:{int(reaction_ms)}", kind="reactions", at=sent_time(reaction_ms))
