"""iMessage edits and unsends as revisions (macOS 13+ / iOS 16+).

Messages.app changes a message row in place: ``date_edited`` and ``date_retracted`` are set, and the edit
history goes into ``message_summary_info``, a binary plist: ``ec`` maps each edited part (``"0"``, ``"1"``,
...) to its versions, oldest first, each ``{d: seconds since 2001, t: typedstream body}``; ``rp`` lists
retracted (unsent) parts. (Format as read by ReagentX/imessage-exporter's ``edited.rs``; its real sample
plists decode here to the same texts and times.)

memex never overwrites the stored original: each version after the first becomes a revision record
(``kind = "edit"``, id ``edit-<ns>`` or ``edit-p<part>-<ns>`` for a multi-part message) and an unsend a
tombstone (``kind = "delete"``, id ``unsend-<ns>``), stored create-only under
``revisions/<source>/<message id>/<revision id>.json``, so seeing the same change twice is a duplicate.
A message first seen already edited is stored with its first version as the original.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from memex.plugin import Message
from pollers.imessage.typedstream import decode_attributed_body

APPLE_TO_NS = 1_000_000_000


@dataclass(frozen=True)
class Version:
    """One version of one part of an edited message."""

    part: str
    ns: int  # nanoseconds since 2001-01-01 UTC
    text: str | None


def edit_history(summary_info: bytes | None) -> list[Version]:
    """The versions in a ``message_summary_info`` plist, per part oldest first; [] when there is none or it cannot be read."""
    if not summary_info:
        return []
    try:
        import plistlib  # here, not at the top: an idle cron poll reads no message (start-up cost)

        doc = plistlib.loads(bytes(summary_info))
    except Exception:  # a plist we cannot read: the current row still gives one revision
        return []
    edits = doc.get("ec") if isinstance(doc, dict) else None
    if not isinstance(edits, dict):
        return []
    out = []
    for part in sorted(edits, key=lambda p: (len(str(p)), str(p))):
        for version in edits[part] if isinstance(edits[part], list) else []:
            if not isinstance(version, dict) or not isinstance(version.get("d"), int | float):
                continue
            body = version.get("t")
            try:
                text = decode_attributed_body(bytes(body)) if isinstance(body, bytes) else None
            except ValueError:
                text = None
            out.append(Version(str(part), int(version["d"]) * APPLE_TO_NS, text))
    return out


def change_time(row: dict[str, Any]) -> int:
    """When the row last changed in place (edit or unsend), in the table's own units; 0 if never."""
    return max(int(row.get("date_edited") or 0), int(row.get("date_retracted") or 0))


def _edit_id(version: Version, parts: set[str]) -> str:
    """A later version's revision id: its time, and its part when the message has several."""
    return f"edit-{version.ns}" if len(parts) == 1 else f"edit-p{version.part}-{version.ns}"


def revision_ids(row: dict[str, Any]) -> tuple[str, ...]:
    """The ids of the revisions :func:`original_and_revisions` makes of ``row`` (for ``memex verify``), in its order."""
    history = edit_history(row.get("message_summary_info"))
    parts = {v.part for v in history}
    first: dict[str, Version] = {}
    for version in history:
        first.setdefault(version.part, version)
    ids = [_edit_id(v, parts) for v in history if first[v.part] is not v]
    if not history and row.get("date_edited"):
        ids.append(f"edit-{row['date_edited']}")
    if row.get("date_retracted"):
        ids.append(f"unsend-{row['date_retracted']}")
    return tuple(ids)


def original_and_revisions(message: Message, row: dict[str, Any], at: Any) -> tuple[Message, list[Message]]:
    """The record to store as the original (its first version if the history has one) and the revisions after it.

    ``at`` turns a chat.db date into RFC 3339 (the poller's own converter).
    """
    history = edit_history(row.get("message_summary_info"))
    revisions: list[Message] = []
    original = message
    parts = {v.part for v in history}
    if history:
        first: dict[str, Version] = {}
        for version in history:
            first.setdefault(version.part, version)
        if len(parts) == 1:
            original = replace(message, text=next(iter(first.values())).text, edited_at=None)
        for version in history:
            if first[version.part] is version:
                continue
            revisions.append(replace(message, text=version.text, deleted=False,
                                     revision={"id": _edit_id(version, parts), "kind": "edit", "at": at(version.ns)}))  # fmt: skip
    elif row.get("date_edited"):  # edited, history unreadable: the current text is the one revision we can know
        revisions.append(replace(message, deleted=False, revision={"id": f"edit-{row['date_edited']}", "kind": "edit",
                                                                   "at": at(row["date_edited"])}))  # fmt: skip
    if row.get("date_retracted"):
        revisions.append(replace(message, text=None, attachments=[], deleted=True,
                                 revision={"id": f"unsend-{row['date_retracted']}", "kind": "delete", "at": at(row["date_retracted"])}))  # fmt: skip
    return original, revisions
