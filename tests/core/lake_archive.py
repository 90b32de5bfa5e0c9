"""A generated archive over all five sources for the lake's tests: messages, mails, events, reactions, attachments,
and revisions (edits, unsends, reaction changes), each record in the shape its source's poller stores.

:func:`records` is deterministic for a seed; :func:`write` stores them at their keys in a file store's folder (or
through any object store with :func:`put_all`), as a poll would, valid against the published schema.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from memex.records import Attachment, Conversation, Message, Revision, Sender
from memex.store.objects import ObjectStore

SOURCES = ("imessage", "signal", "mail", "teams", "messenger")
_WORDS = ("lease", "flat", "move", "anna", "boxes", "keys", "friday", "dinner", "photo", "invoice", "train", "berlin", "garden")


def _when(rng: random.Random, year: int) -> str:
    return f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"


def records(n: int = 60, *, seed: int = 7, start: int = 0) -> list[Message]:
    """``n`` originals per source (numbered from ``start``) and their revisions, reactions and events."""
    rng = random.Random(seed * 1_000_003 + start)
    out: list[Message] = []
    for source in SOURCES:
        for i in range(start, start + n):
            year = 2019 + i % 6
            conv = Conversation(
                id=f"{source}-chat-{i % 7}", name=None if i % 2 else f"Chat {i % 7}", participants=["+4917000000", f"p{i % 5}"]
            )
            sender = Sender(id=f"p{i % 5}", name=f"Person {i % 5}", is_me=i % 3 == 0)
            text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 12)))
            kind = "event" if i % 17 == 5 else "message"
            attachments: list[Attachment] = []
            if i % 9 == 0:
                body = f"{source}-{i}".encode()
                attachments.append(Attachment(id=f"a{i}", filename=f"photo{i}.jpg", mime_type="image/jpeg", size=len(body),
                                              sha256=hashlib.sha256(body).hexdigest()))  # fmt: skip
            extra: dict[str, object] = {"subject": f"About {text[:20]}", "to": ["me@example.net"]} if source == "mail" else {}
            sent = _when(rng, year)
            m = Message(source=source, type=kind, native_id=f"{source}-{i}", sent_at=sent, conversation=conv, sender=sender,
                        text=None if kind == "event" else text, attachments=attachments, extra=extra)  # fmt: skip
            out.append(m)
            if i % 4 == 1:  # an edit, and for some a second one later
                out.append(_revision(m, "edit", f"e{i}", sent.replace("Z", ".5Z"), text=text + " (edited)"))
                if i % 8 == 1:
                    out.append(_revision(m, "edit", f"e{i}b", sent.replace(":", ":", 1).replace("Z", ".9Z"), text=text + " (again)"))
            if i % 10 == 3:
                out.append(_revision(m, "delete", f"d{i}", sent.replace("Z", ".7Z"), text=None, deleted=True))
            if i % 6 == 2:
                out.append(
                    _revision(m, "reactions", f"r{i}", sent.replace("Z", ".6Z"), text=text, extra={**extra, "reactions": {"👍": ["p1"]}})
                )
            if source == "imessage" and i % 5 == 4:  # a tapback: a record of its own naming its target
                out.append(Message(source=source, type="reaction", native_id=f"{source}-{i}-tapback", sent_at=sent, conversation=conv,
                                   sender=Sender(id="p2", name=None, is_me=False), text="Loved", reply_to=m.native_id))  # fmt: skip
    return out


def _revision(m: Message, kind: str, rid: str, at: str, *, text: str | None, deleted: bool = False,
              extra: dict[str, object] | None = None) -> Message:  # fmt: skip
    return Message(source=m.source, type=m.type, native_id=m.native_id, sent_at=m.sent_at, conversation=m.conversation, sender=m.sender,
                   text=text, attachments=m.attachments, edited_at=at if kind == "edit" else None, deleted=deleted,
                   extra=dict(m.extra if extra is None else extra), revision=Revision(id=rid, kind=kind, at=at))  # fmt: skip


def write(root: Path, messages: list[Message]) -> dict[str, bytes]:
    """Store ``messages`` under ``root`` (a file store's folder) at their keys; returns key -> bytes."""
    out: dict[str, bytes] = {}
    for m in messages:
        key, body = m.key(), m.to_json()
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        out[key] = body
    return out


def put_all(store: ObjectStore, messages: list[Message]) -> dict[str, bytes]:
    """Store ``messages`` through ``store`` (create-only, as a poll does); returns key -> bytes."""
    out: dict[str, bytes] = {}
    for m in messages:
        key, body = m.key(), m.to_json()
        store.put_new(key, body)
        out[key] = body
    return out
