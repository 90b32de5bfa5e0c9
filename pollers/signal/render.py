"""Signal, live: one line of ``signal-cli -o json receive`` as a record, and the edit chains that name an edit's original.

Field names come from signal-cli's ``JsonMessageEnvelope`` and neighbours. A message, an edit, a
reaction or a remote delete becomes a record (edits, reactions and deletes as revisions of their
target); receipts, typing, calls, stories and group updates are counted in :attr:`Renderer.skipped`;
a line that is not JSON or an envelope that cannot be read is a :class:`~memex.source.Failure` with
its raw bytes. The poller (:mod:`pollers.signal.cli`) feeds it the lines of its spool.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from memex.plugin import Attachment, Content, Conversation, Cursor, Failure, Item, Message, Sender, atomic_replace, ensure_private_dir
from pollers.signal.extras import compact, contact, display_name, mention, preview, quote, sticker, sticker_id, times
from pollers.signal.groups import GroupNames, read_map
from pollers.signal.records import delete_revision, edit_revision, native_id, reaction_revision, sent_time

EDITS = "edits.json"
MAX_EDITS = 20000  # edit chains remembered (newest kept)
SKIPPED_KINDS = ("receiptMessage", "typingMessage", "callMessage", "storyMessage")
# what makes a data message a message; with a groupInfo and none of these it is a group change (UPDATE, or DELIVER
# when you were added), which is skipped
BODY = ("message", "attachments", "sticker", "contacts", "previews", "reaction", "remoteDelete", "pollCreate", "quote")


def data_dir(config_dir: Path | None) -> Path:
    """signal-cli's data folder (``--config``; by default ``$XDG_DATA_HOME/signal-cli``), where it keeps attachments."""
    if config_dir is not None:
        return config_dir
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "signal-cli"


class EditChains:
    """Which message each edit revises, kept in ``<spool>/edits.json`` (read on first use, written by :meth:`save`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._edits: dict[str, str] | None = None  # an edit's own ID -> the original it revises (edits chain)
        self._edits_changed = False

    def original_of(self, target: str, edit: str) -> str:
        """The message an edit revises. Signal chains edits: a second edit targets the first edit's timestamp,
        so each edit's own ID is remembered and resolved back to the original."""
        if self._edits is None:
            self._edits = read_map(self.root / EDITS)
        original = self._edits.get(target, target)
        if self._edits.get(edit) != original:
            self._edits[edit] = original
            self._edits_changed = True
        return original

    def save(self) -> None:
        """Write the chains if they changed (the newest :data:`MAX_EDITS`)."""
        if self._edits is not None and self._edits_changed:
            keep = dict(list(self._edits.items())[-MAX_EDITS:])
            ensure_private_dir(self.root)
            atomic_replace(self.root / EDITS, json.dumps(keep).encode())
            self._edits_changed = False


class Renderer:
    """Turns signal-cli's JSON lines into items for source ``name``; counts what is not a message in ``skipped``."""

    def __init__(self, name: str, config_dir: Path | None, edits: EditChains, groups: GroupNames) -> None:
        self.name = name
        self.config_dir = config_dir  # signal-cli's --config: its attachments/ are read there
        self.edits = edits
        self.groups = groups
        self.skipped: Counter[str] = Counter()

    def render(self, raw: bytes, cursor: Cursor) -> Item | None:
        """One line of signal-cli's JSON output as an item (None: not a message, counted in ``skipped``)."""
        if not raw.strip():
            return None
        ref = f"line {cursor['lines']}"
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise ValueError("not an object")
        except ValueError:
            return Item(cursor, failure=Failure(_line_id(raw), "a line from signal-cli is not a JSON object", raw=raw, ref=ref))
        try:
            return self._render(doc, raw, cursor, ref)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            return Item(cursor, failure=Failure(_line_id(raw), f"malformed envelope ({type(exc).__name__})", raw=raw, ref=ref))

    def _render(self, doc: dict[str, Any], raw: bytes, cursor: Cursor, ref: str) -> Item | None:
        env = doc.get("envelope") or {}
        if "exception" in doc:
            kind = str((doc.get("exception") or {}).get("type") or "unknown")
            return Item(cursor, failure=Failure(_line_id(raw), f"signal-cli could not read this envelope ({kind})", raw=raw, ref=ref))
        author = env.get("sourceUuid")
        for key in SKIPPED_KINDS:
            if env.get(key) is not None:
                self.skipped[key.removesuffix("Message")] += 1
                return None
        if env.get("editMessage") is not None:
            return self._data(env, author, env["editMessage"]["dataMessage"], cursor, edit_of=env["editMessage"]["targetSentTimestamp"])
        if env.get("dataMessage") is not None:
            return self._data(env, author, env["dataMessage"], cursor)
        sync = env.get("syncMessage")
        if sync is not None and sync.get("sentMessage") is not None:
            sent = sync["sentMessage"]
            if sent.get("editMessage") is not None:
                edit = sent["editMessage"]
                return self._data(env, author, edit["dataMessage"], cursor, edit_of=edit["targetSentTimestamp"], sent=sent)
            return self._data(env, author, sent, cursor, sent=sent)
        self.skipped["sync" if sync is not None else "other"] += 1
        return None

    def _data(
        self,
        env: dict[str, Any],
        author: Any,
        data: dict[str, Any],
        cursor: Cursor,
        *,
        edit_of: Any = None,
        sent: dict[str, Any] | None = None,
    ) -> Item | None:
        if not isinstance(author, str) or not author:
            raise ValueError("no sender service ID")
        ts = int(data["timestamp"])
        group = data.get("groupInfo") or {}
        if data.get("isExpirationUpdate"):
            self.skipped["expiration_update"] += 1
            return None
        gid = group.get("groupId")
        if group and not any(data.get(k) for k in BODY):  # a group change (being added, a new title...): no message
            self.skipped["group_update"] += 1
            return None
        is_me = sent is not None
        peer = (sent or {}).get("destinationUuid") if is_me else author
        conversation = Conversation(
            id=gid or peer,
            name=self.groups.name(str(gid), group.get("groupName")) if gid else (None if is_me else env.get("sourceName")),
            participants=[p for p in (peer,) if p] if not group else [],
        )
        sender = Sender(id=author, name=env.get("sourceName"), is_me=is_me)
        at = sent_time(ts)

        def record(nid: str, kind: str = "message", **kw: Any) -> Message:
            return Message(source=self.name, type=kind, native_id=nid, sent_at=at, conversation=conversation, sender=sender, **kw)

        reaction, delete = data.get("reaction"), data.get("remoteDelete")
        if reaction is not None:
            target = native_id(reaction["targetAuthorUuid"], reaction["targetSentTimestamp"])
            rev = reaction_revision(author, ts)
            how = {"emoji": reaction.get("emoji"), "by": author, "remove": bool(reaction.get("isRemove"))}
            return Item(cursor, message=record(target, "reaction", revision=rev, extra={"reaction": how}))  # the reactor's record
        if delete is not None:
            return Item(cursor, message=record(native_id(author, delete["timestamp"]), revision=delete_revision(ts), deleted=True))
        attachments, contents = self._attachments(data.get("attachments") or [])
        quoted = data.get("quote")
        extra = live_extras(data, env if edit_of is None else {})
        if extra.get("sticker"):
            contents += self._sticker(extra["sticker"], attachments)
        own = native_id(author, ts)
        message = record(
            own if edit_of is None else self.edits.original_of(native_id(author, edit_of), own),
            text=data.get("message"),
            attachments=attachments,
            reply_to=native_id(quoted["authorUuid"], quoted["id"]) if quoted and quoted.get("authorUuid") else None,
            extra=extra,
        )
        if edit_of is not None:
            message.revision = edit_revision(ts)
            message.edited_at = at
        return Item(cursor, message=message, contents=contents)

    def _sticker(self, found: dict[str, Any], attachments: list[Attachment]) -> list[Content]:
        """The sticker's image as an attachment: signal-cli keeps a pack it fetched in ``stickers/<pack id>/``, each
        image under its number and a ``manifest.json`` naming each one's emoji and type."""
        folder = data_dir(self.config_dir) / "stickers" / re.sub(r"[^0-9a-f]", "_", found["pack_id"])
        try:
            manifest = json.loads((folder / "manifest.json").read_bytes())
            n = found["sticker_id"]  # older manifests name a sticker by its file only
            entry = next(x for x in manifest.get("stickers") or [] if isinstance(x, dict) and (x.get("id") == n or x.get("file") == str(n)))
        except (OSError, ValueError, StopIteration, AttributeError):
            entry = {}
        if isinstance(entry.get("emoji"), str) and entry["emoji"] and "emoji" not in found:
            found["emoji"] = entry["emoji"]
        path = folder / str(found["sticker_id"])
        att = Attachment(id=sticker_id(found["pack_id"], found["sticker_id"]), filename=None, mime_type=entry.get("contentType"),
                         size=path.stat().st_size if path.is_file() else None)  # fmt: skip
        attachments.append(att)
        if not path.is_file():
            att["missing"] = True
            return []
        return [Content(index=len(attachments) - 1, open=_opener(path))]

    def _attachments(self, listed: list[dict[str, Any]]) -> tuple[list[Attachment], list[Content]]:
        attachments: list[Attachment] = []
        contents: list[Content] = []
        folder = data_dir(self.config_dir) / "attachments"
        for i, a in enumerate(listed):
            att = Attachment(id=str(a.get("id")), filename=a.get("filename"), mime_type=a.get("contentType"), size=a.get("size"))
            attachments.append(att)
            if a.get("id"):
                path = folder / re.sub(r"[^A-Za-z0-9_.-]", "_", str(a["id"]))
                contents.append(Content(index=i, open=_opener(path)))
            else:
                att["missing"] = True
        return attachments, contents


def live_extras(data: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """``extra`` of a data message (:mod:`pollers.signal.extras`); ``env`` gives the server and received times."""
    raw = data.get("sticker") or {}
    mentions = [m for x in data.get("mentions") or [] if (m := mention(x.get("uuid"), x.get("start"), x.get("length")))]
    q = data.get("quote") or {}
    contacts = [contact(display_name(c.get("name") or {}, "given", "middle", "family", "nickname"), c.get("phone"), c.get("email"),
                        c.get("organization")) for c in data.get("contacts") or [] if isinstance(c, dict)]  # fmt: skip
    extra = {
        "sticker": sticker(raw.get("packId"), raw.get("stickerId")) if raw else None,
        "mentions": mentions,
        "quote": quote(q.get("id"), q.get("authorUuid"), q.get("text")) if q else None,
        "previews": [p for x in data.get("previews") or [] if (p := preview(x.get("url"), x.get("title"), x.get("description")))],
        "contacts": contacts,
        "pollCreate": data.get("pollCreate"),
        "textStyles": data.get("textStyles"),
        "expires_in_s": data.get("expiresInSeconds"),
        "view_once": bool(data.get("viewOnce")),
        **times(env.get("serverReceivedTimestamp"), env.get("serverDeliveredTimestamp")),
    }
    return compact(extra)


def _opener(path: Path) -> Callable[[], IO[bytes]]:
    def open_it() -> IO[bytes]:
        return open(path, "rb")

    return open_it


def _line_id(raw: bytes) -> str:
    return "line:" + hashlib.sha256(raw).hexdigest()[:32]
