"""Messenger threads as records: mojibake repaired, a derived native ID, revisions for what changes between exports.

**Mojibake.** The JSON export writes each UTF-8 byte as its own ``\\u00XX`` escape. :func:`repair` undoes it
with a latin-1 round trip and keeps the string as it is where that fails (text that was never mangled, as
in the encrypted-chat export): nothing is ever dropped.

**Thread key.** What the standard and the encrypted-chat export share is the participant names (the
folder name and thread id exist only in the standard export and the folder name changes with a
participant's name). The key is the sorted, case-folded set of participant names; when those do not tell
threads apart (a deactivated "Facebook user", fewer than two names) the folder or file name is added.

**Native ID.** ``<timestamp ms>-<hash>`` where the hash covers the thread key, the timestamp and the
sender. Reactions, the unsent flag, the thread title and its folder are left out, so a message is the
same object in every export and a message unsent later (its content is then gone from the export)
keeps its ID. Only when the same sender has several messages in the same millisecond of a thread does
the hash also cover the repaired text and the media file names, plus an ordinal among identical ones.

**Records.** A message with content is an original record (create-only: the first export that has it
fills it). Reactions are a ``reactions`` revision whose ID is a hash of the reaction set (the same set
seen again is a duplicate; a changed set is a new revision). An unsent message is a ``delete``
revision (``id = "unsent"``), never an original, so an older export read later still stores the text.
"""

from __future__ import annotations

import functools
import hashlib
import json
import mimetypes
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

from memex.plugin import Attachment, Content, Conversation, Failure, Item, Message, Revision, Sender, rfc3339
from pollers.messenger.exports import Reader, Unit

MEDIA_KINDS = ("photos", "videos", "audio_files", "files", "gifs")
# The standard export's message types that record what happened in a thread, not what someone wrote: a call,
# people added to or leaving a group. memex.message/1 calls these ``event`` (as iMessage's group changes).
EVENT_TYPES = frozenset({"Call", "Subscribe", "Unsubscribe"})
ANONYMOUS = ("facebook user", "utilisateur de facebook", "facebook-nutzer")


def repair(text: str) -> str:
    """Undo the export's mojibake losslessly: a latin-1 round trip, or ``text`` unchanged where that fails."""
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text


@functools.lru_cache(maxsize=4096)
def _fold(name: str) -> str:
    # Cached: a thread has a handful of senders and each message folds its sender's name up to three times.
    return unicodedata.normalize("NFC", name).casefold().strip()


def _h(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Thread:
    """What a unit says about its thread."""

    participants: list[str]
    title: str | None
    key: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Parsed:
    """One message of a thread, normalised from either format."""

    ts: int
    sender: str
    text: str | None
    media: list[tuple[str, str]]  # (kind, uri as written in the export)
    reactions: list[tuple[str, str]]  # (actor, reaction), sorted
    unsent: bool
    extra: dict[str, Any]
    raw: dict[str, Any]


def thread_of(doc: dict[str, Any], unit: Unit) -> Thread:
    """The thread a unit's JSON document describes (participants, title, key)."""
    raw_people = doc.get("participants") or []
    people = sorted({repair(p["name"] if isinstance(p, dict) else str(p)) for p in raw_people if p})
    title = doc.get("title") if unit.kind == "standard" else doc.get("threadName")
    key = "\x1e".join(_fold(p) for p in people)
    if len(people) < 2 or any(_fold(p) in ANONYMOUS for p in people):
        key += "\x1d" + (unit.folder or unit.key.rsplit("/", 1)[-1].removesuffix(".json"))
    extra: dict[str, Any] = {"section": unit.section} if unit.section else {}
    if unit.folder:
        extra["thread_folder"] = unit.folder
    return Thread(people, repair(title) if isinstance(title, str) else None, key, extra)


def parse_message(m: dict[str, Any], kind: str) -> Parsed:
    """One message object of either format (KeyError/TypeError/ValueError when it is not one)."""
    if kind == "standard":
        ts, sender, text = int(m["timestamp_ms"]), m.get("sender_name"), m.get("content")
        media = (
            []
            if m.keys().isdisjoint(MEDIA_KINDS)  # most messages: no media key at all
            else [(k, str(a["uri"])) for k in MEDIA_KINDS for a in (m.get(k) or []) if isinstance(a, dict) and a.get("uri")]
        )
        if isinstance(sticker := m.get("sticker"), dict) and sticker.get("uri"):
            media.append(("sticker", str(sticker["uri"])))
        unsent = bool(m.get("is_unsent"))
        extra: dict[str, Any] = {}
        if (v := m.get("type")) is not None:
            extra["type"] = v
        if (v := m.get("call_duration")) is not None:
            extra["call_duration"] = v
        share = m.get("share")
        if isinstance(share, dict):
            extra["share"] = {k: repair(v) if isinstance(v, str) else v for k, v in share.items()}
    else:
        ts, sender, text = int(m["timestamp"]), m.get("senderName"), m.get("text")
        media = [("media", str(a["uri"])) for a in (m.get("media") or []) if isinstance(a, dict) and a.get("uri")]
        unsent = bool(m.get("isUnsent"))
        extra = {"type": m["type"]} if m.get("type") else {}
    if ts < 0 or not isinstance(sender, str) or (text is not None and not isinstance(text, str)):
        raise ValueError("not a message")
    found = m.get("reactions")
    reactions = sorted((repair(str(r.get("actor", ""))), repair(str(r.get("reaction", "")))) for r in found) if found else []
    return Parsed(ts, repair(sender), repair(text) if text else None, media, reactions, unsent, extra, m)


def unit_messages(reader: Reader, unit: Unit, export_hash: str) -> Iterator[Thread | list[Parsed] | Failure]:
    """A unit's thread (first), then per file what cannot be read (a Failure each) and its messages newest first (one
    list); a file that cannot be read is one Failure."""
    thread: Thread | None = None
    for name in unit.files:
        raw = reader.read(name)
        where = f"{reader.label}:{name}"
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
                raise ValueError("no messages list")
        except ValueError as exc:
            what = "not valid JSON" if isinstance(exc, json.JSONDecodeError) else "not a Messenger thread file"
            reason = f"{name} in export {reader.label} is {what}; the rest of the export is read"
            yield Failure(f"file:{export_hash[:16]}:{name}", reason, raw=raw, ref=where)
            continue
        if thread is None:
            thread = thread_of(doc, unit)
            yield thread
        parsed: list[Parsed] = []
        plain = unit.kind == "standard"
        senders: dict[str, str] = {}  # sender name as written -> repaired (a thread has a handful of senders)
        for i, m in enumerate(doc["messages"]):
            try:
                # The common message (only a sender, a time, a text and flags that change nothing) parsed inline: what
                # parse_message does for it, without its look-ups of keys the message does not have.
                if plain and type(m) is dict and m.keys() <= _PLAIN_KEYS:
                    ts, sender, text = int(m["timestamp_ms"]), m.get("sender_name"), m.get("content")
                    if ts < 0 or type(sender) is not str or (text is not None and not isinstance(text, str)):
                        raise ValueError("not a message")
                    who = senders.get(sender)
                    if who is None:
                        who = senders[sender] = repair(sender)
                    parsed.append(Parsed(ts, who, repair(text) if text else None, _NONE, _NONE, bool(m.get("is_unsent")), _NO_EXTRA, m))
                else:
                    parsed.append(parse_message(m, unit.kind))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                body = json.dumps(m, sort_keys=True).encode()
                reason = f"message {i} of {name} in export {reader.label} is malformed ({type(exc).__name__})"
                yield Failure("record:" + hashlib.sha256(body).hexdigest()[:32], reason, raw=body, ref=where)
        parsed.sort(key=_TS, reverse=True)  # newest first; stable (also reversed): the export's order among equal times
        yield parsed


_TS = attrgetter("ts")
# A standard message with only these keys needs no look-up beyond its sender, time, text and unsent flag.
_PLAIN_KEYS = frozenset({"sender_name", "timestamp_ms", "content", "is_geoblocked_for_viewer", "is_unsent"})
# Shared by every plain message: never changed in place (parse_message builds its own for a message with media/extra).
_NONE: list[Any] = []
_NO_EXTRA: dict[str, Any] = {}
# An item's blobs and contents when it has none, shared (never changed in place: the uploader only reads them).
_NO_BLOBS: dict[str, bytes] = {}
_NO_CONTENTS: list[Content] = []


def native_ids(group: list[Parsed], key: str) -> list[str]:
    """IDs of the messages of one millisecond (in stream order), see the module docstring."""
    if len(group) == 1:  # the common case: one message in its millisecond
        return [_sole_id(key, group[0].ts, _fold(group[0].sender))]
    by_sender: dict[str, int] = {}
    for p in group:
        by_sender[_fold(p.sender)] = by_sender.get(_fold(p.sender), 0) + 1
    seen: dict[str, int] = {}
    ids = []
    for p in group:
        who = _fold(p.sender)
        if by_sender[who] == 1:
            ids.append(_sole_id(key, p.ts, who))
            continue
        names = sorted(uri.rsplit("/", 1)[-1] for _, uri in p.media)
        content = _h(p.text or "", *names)
        ordinal = seen.get(content, 0)
        seen[content] = ordinal + 1
        ids.append(f"{p.ts}-{_h('fbm', key, p.ts, who, content, ordinal)[:32]}")
    return ids


def _sole_id(key: str, ts: int, who: str) -> str:
    """The ID of the only message of sender ``who`` (folded) in its millisecond of thread ``key``: what
    ``_h("fbm", key, ts, who)`` hashes, in one f-string."""
    hashed = f"fbm\x1f{key}\x1f{ts}\x1f{who}".encode("utf-8", "surrogatepass")
    return f"{ts}-{hashlib.sha256(hashed).hexdigest()[:32]}"


_EXACT_MS = 2**32 * 1000  # below this (the year 2106), ts / 1000 as a float rounds back to ts's exact milliseconds


@functools.lru_cache(maxsize=1024)
def _minute(minute: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.gmtime(minute * 60))


def _sent_at(ts: int) -> str:
    """``rfc3339(datetime.fromtimestamp(ts / 1000, UTC))``, the same text at a fraction of the cost (one per message):
    the date and minute are formatted once per minute (a chat's messages come in bursts), seconds and milliseconds
    appended."""
    if ts >= _EXACT_MS:
        return rfc3339(datetime.fromtimestamp(ts / 1000, UTC))
    minute, rest = divmod(ts, 60_000)
    return f"{_minute(minute)}{_SECONDS[rest // 1000]}{_FRACTIONS[rest % 1000]}"  # looked up, not formatted (1.2 us to 0.2)


_SECONDS = [f":{s:02d}" for s in range(60)]
_FRACTIONS = ["Z"] + [f".{ms:03d}000Z" for ms in range(1, 1000)]  # RFC 3339 as rfc3339() writes it: microseconds or none


class Renderer:
    """Turns a unit's stream into items (no cursors yet): originals, reactions and delete revisions."""

    def __init__(self, source: str, reader: Reader, unit: Unit, me: str | None, floor_ms: int = 0) -> None:
        self.source, self.reader, self.unit = source, reader, unit
        self.me = _fold(me) if me else None
        self.floor_ms = floor_ms
        self._threads: dict[str, tuple[Conversation, dict[str, Any]]] = {}  # thread key -> what its messages share
        self._senders: dict[str, tuple[Sender, str]] = {}  # sender name -> its sender dict and its folded name

    def items(self, export_hash: str, attachments: bool) -> Iterator[Item]:
        """Every item of the unit, in a fixed order (a resumed read skips a count of them).

        A file's messages are rendered into one list, handed out from it (a generator or a list per message cost
        more); the messages of a file's oldest millisecond wait for the next file, which may go on with them.
        """
        thread: Thread | None = None
        group: list[Parsed] = []  # the messages of one millisecond, not rendered yet
        out: list[Item] = []
        for x in unit_messages(self.reader, self.unit, export_hash):
            if isinstance(x, list):
                if thread is None:  # never: a file's thread comes before its messages
                    continue
                self._file(thread, x, group, attachments, out)
                yield from out
                out.clear()
            elif isinstance(x, Thread):
                thread = x
            else:
                yield Item(cursor=None, failure=x)
        if group and thread is not None:
            self._group(thread, group, attachments, out)
            yield from out

    def _group(self, thread: Thread, group: list[Parsed], attachments: bool, out: list[Item]) -> None:
        """The items of one millisecond's messages, appended to ``out``."""
        for p, nid in zip(group, native_ids(group, thread.key), strict=True):
            if p.ts >= self.floor_ms:
                self._items(thread, p, nid, attachments, out)

    def _file(self, thread: Thread, parsed: list[Parsed], group: list[Parsed], attachments: bool, out: list[Item]) -> None:
        """A file's messages (newest first) rendered into ``out``, one millisecond at a time; ``group`` holds the messages
        of the millisecond not rendered yet (the previous file's last, and this file's last for the next file).

        The only message of its millisecond with nothing but a sender, a time and a text (the common case) is rendered
        here, in one loop with what it needs bound once per file: what ``_group`` and ``_items`` render for it (its
        ID is native_ids' one-message case), field for field.
        """
        key, floor, source = thread.key, self.floor_ms, self.source
        conversation, base = self._threads.get(key) or self._shared(thread)
        senders, sender_of, append = self._senders, self._sender, out.append
        for p in parsed:
            if not group:
                group.append(p)
                continue
            first = group[0]
            if first.ts == p.ts:
                group.append(p)
                continue
            if len(group) > 1 or first.unsent or first.media or first.reactions or first.extra:
                self._group(thread, group, attachments, out)
            elif (ts := first.ts) >= floor:
                sender, who = senders.get(first.sender) or sender_of(first.sender)
                # Positional (a keyword call costs twice as much): source, type, native_id, sent_at, conversation,
                # sender, text, attachments, reply_to, edited_at, deleted, extra, revision; then the Item's cursor,
                # message, failure, blobs, contents, expected_dup.
                message = Message(source, "message", _sole_id(key, ts, who), _sent_at(ts), conversation, sender,
                                  first.text, [], None, None, False, base.copy(), None)  # fmt: skip
                append(Item(None, message, None, _NO_BLOBS, _NO_CONTENTS, True))
            group.clear()
            group.append(p)

    def _shared(self, thread: Thread) -> tuple[Conversation, dict[str, Any]]:
        """The thread's conversation and the extra fields every message of it has, made once per thread."""
        found = self._threads.get(thread.key)
        if found is None:
            # Dict displays, not the TypedDict calls: the same dicts, without a keyword dict each.
            conversation: Conversation = {"id": "thread-" + _h(thread.key)[:24], "name": thread.title, "participants": thread.participants}
            found = self._threads[thread.key] = (conversation, {**thread.extra, "export": self.reader.label})
        return found

    def _sender(self, name: str) -> tuple[Sender, str]:
        """A sender's dict (shared by their messages) and folded name, made once per name."""
        found = self._senders.get(name)
        if found is None:
            who = _fold(name)
            found = self._senders[name] = ({"id": None, "name": name, "is_me": self.me is not None and who == self.me}, who)
        return found

    def _items(self, thread: Thread, p: Parsed, nid: str, attachments: bool, out: list[Item]) -> None:
        """The message's items (an original or a delete revision, then its reactions), appended to ``out``.

        A thread's messages share its conversation dict and a sender's share one sender dict (records are never
        changed in place: :meth:`memex.records.Message.to_dict`); each has its own ``extra``.
        """
        at = _sent_at(p.ts)
        conversation, base = self._shared(thread)
        sender = self._sender(p.sender)[0]
        extra = {**base, **p.extra} if p.extra else base.copy()
        kind = "event" if extra.get("type") in EVENT_TYPES else "message"
        # Messages built directly with keywords (no **kw dict, no closure per message).
        if p.unsent:
            unsent = Message(
                source=self.source, type=kind, native_id=nid, sent_at=at, conversation=conversation, sender=sender,
                deleted=True, extra=extra, revision=Revision(id="unsent", kind="delete", at=None),
            )  # fmt: skip
            out.append(Item(None, message=unsent, expected_dup=True))
        elif p.media:
            atts, contents, extra["media"] = self._media(p, attachments)
            if p.reactions:
                extra["reactions"] = [{"actor": a, "reaction": r} for a, r in p.reactions]
            message = Message(
                source=self.source, type=kind, native_id=nid, sent_at=at, conversation=conversation, sender=sender,
                text=p.text, attachments=atts, extra=extra,
            )  # fmt: skip
            out.append(Item(None, message=message, contents=contents, expected_dup=True))
        else:  # the common case: no media
            if p.reactions:
                extra["reactions"] = [{"actor": a, "reaction": r} for a, r in p.reactions]
            message = Message(
                source=self.source, type=kind, native_id=nid, sent_at=at, conversation=conversation, sender=sender,
                text=p.text, attachments=[], extra=extra,
            )  # fmt: skip
            out.append(Item(None, message=message, expected_dup=True))
        if p.reactions:
            rid = "reactions-" + _h(*(f"{a}\x1f{r}" for a, r in p.reactions))[:24]
            how = {"reactions": [{"actor": a, "reaction": r} for a, r in p.reactions]}
            reactions = Message(  # the set of reactions, a revision of its own
                source=self.source, type="reaction", native_id=nid, sent_at=at, conversation=conversation, sender=sender,
                extra=how, revision=Revision(id=rid, kind="reactions", at=None),
            )  # fmt: skip
            out.append(Item(None, message=reactions, expected_dup=True))

    def _media(self, p: Parsed, store: bool) -> tuple[list[Attachment], list[Content], list[dict[str, str]]]:
        atts: list[Attachment] = []
        contents: list[Content] = []
        kinds: list[dict[str, str]] = []
        if not p.media:
            return atts, contents, kinds
        for kind, uri in p.media:
            path = self._resolve(uri)
            name = uri.rsplit("/", 1)[-1]
            att = Attachment(id=uri, filename=name, mime_type=mimetypes.guess_type(name)[0], size=None)
            kinds.append({"kind": kind, "path": path or uri})
            if path is None:
                att["missing"] = True
            else:
                att["size"] = self.reader.size(path)
                if store:
                    contents.append(Content(index=len(atts), open=self.reader.opener(path)))
            atts.append(att)
        return atts, contents, kinds

    def _resolve(self, uri: str) -> str | None:
        """Where a media URI is inside the export (it is relative to the export root, or to the thread file)."""
        clean = uri.removeprefix("./")
        if "://" in uri or ".." in clean.split("/") or clean.startswith("/"):
            return None
        base = self.unit.key.rsplit("/", 1)[0] + "/" if "/" in self.unit.key else ""
        roots = {self.unit.key.split(marker, 1)[0] for marker in ("your_facebook_activity/", "messages/") if marker in self.unit.key}
        for candidate in (clean, *(r + clean for r in sorted(roots)), base + clean, repair(clean)):
            if self.reader.size(candidate) is not None:
                return candidate
        return None
