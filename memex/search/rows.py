"""What the index keeps of a stored record: one row per message, whatever its source.

A row holds the message's searchable fields (latest text, sender, recipients, conversation, subject, attachment
file names) and the fields queries filter on (source, time, is_me, attachments, deleted). A revision record is not a
row of its own: it changes its message's row (an edit's text replaces the text searched; an unsend or delete marks
the row deleted, which searches leave out unless asked). Only generic record fields are read; the source-specific
names are the mail's: ``extra.subject``, ``extra.to``/``extra.cc`` and their display names ``extra.to_names``/
``extra.cc_names`` for recipients, ``extra.search_text`` (words of parts that are not the text, searched as the text),
and ``extra.references``/``extra.in_reply_to`` for threads.

**Threads.** A row's links (:func:`links`) are the IDs that tie it to others in its source: its native ID, its
conversation's ID, and a mail's References and In-Reply-To. Not ``reply_to``: a mail's is one of those already, and a
chat is its conversation (a reply or a reaction naming a message of another chat must not join the two chats). Rows that share a link, directly or through
others, are one conversation (a mail thread joined across missing parents, as notmuch and JWZ's algorithm join it; a
chat by its conversation); its ``thread`` is the lowest row id among them (the earliest message), whatever order the
records came in.
"""

from __future__ import annotations

import zlib
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable

TEXT_KINDS = ("edit", "update")  # revision kinds whose text replaces the message's
ID_SPREAD = 1024  # row ids per millisecond (time_id)
EARLIEST_MS, LATEST_MS = -62135596800000, 253402300800000  # 0001-01-01 and 10000-01-01, UTC
FIRST_TIMED = EARLIEST_MS * ID_SPREAD  # the lowest row id of a message with a time
NO_TIME = FIRST_TIMED - (1 << 40)  # a message with no time: an id below every timed one (minus 32 bits of its key's hash)
PROBE = 64 * ID_SPREAD  # a taken row id is looked past in blocks of this many ids, 64 ms (free_ids)


class Row(NamedTuple):
    """One message's row (see the module docstring). Named tuples, not dataclasses: a poll that adds to the index
    imports this module, and defining a dataclass costs about a millisecond."""

    key: str
    source: str
    native_id: str
    sent_at: str | None
    ts: float | None
    conv_id: str
    conv_name: str
    sender_id: str
    sender_name: str
    is_me: bool
    recipients: str
    subject: str
    attachments: str
    n_attachments: int
    text: str
    deleted: bool
    search_text: str
    links: tuple[str, ...]


class RevisionRow(NamedTuple):
    """One revision of a message: which message, when, what kind, and its text."""

    key: str
    message_key: str
    kind: str
    at: str
    text: str | None
    deleted: bool


def timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time, or None (absent or unreadable)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()  # Python 3.11 reads the "Z" suffix
    except (ValueError, OverflowError, OSError):  # a naive time far from now cannot be made local
        return None


_EMPTY: dict[str, Any] = {}


def _s(value: Any) -> str:
    return value if type(value) is str else ""


def _names(values: Any) -> list[str]:
    return [v for v in values if isinstance(v, str)] if isinstance(values, (list, tuple)) else []  # a tuple: a record's
    # dict handed over as it was rendered (memex.uploader.same_when_read), read as the list its JSON holds


def load_record(body: bytes) -> dict[str, Any] | None:
    """The record ``body`` holds, or None when it is not a JSON object (left out, like an unreadable object)."""
    import json  # here: a search never reads a record

    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


LINK_SEP = "\x1f"  # between a link's source and its ID


def links(source: str, native_id: str, conv_id: str, extra: dict[str, Any]) -> tuple[str, ...]:
    """A row's links (see the module docstring), each ``source`` + :data:`LINK_SEP` + an ID, each once, in order."""
    ids = [native_id, conv_id, *_names(extra.get("references")), *_names(extra.get("in_reply_to"))]
    return tuple(dict.fromkeys(f"{source}{LINK_SEP}{i}" for i in ids if i))


def message_row(key: str, doc: dict[str, Any]) -> Row:
    """The row of an original record stored at ``key`` (fields of the wrong type read as empty)."""
    conv = doc.get("conversation")
    conv = conv if type(conv) is dict else _EMPTY
    sender = doc.get("sender")
    sender = sender if type(sender) is dict else _EMPTY
    extra = doc.get("extra")
    extra = extra if type(extra) is dict else _EMPTY
    sender_id = _s(sender.get("id"))
    recipients = _names(extra.get("to")) + _names(extra.get("cc")) if "to" in extra or "cc" in extra else []
    if not recipients:
        recipients = [p for p in _names(conv.get("participants")) if p != sender_id]
    names = [n for n in _names(extra.get("to_names")) + _names(extra.get("cc_names")) if n]  # display names, after
    recipients_text = "\n".join(x for x in ("\n".join(recipients), "\n".join(names)) if x)
    attachments = doc.get("attachments")
    attachments = [a for a in attachments if type(a) is dict] if isinstance(attachments, (list, tuple)) else []
    sent_at = doc.get("sent_at")
    sent_at = sent_at if type(sent_at) is str else None
    source, native_id, conv_id = _s(doc.get("source")), _s(doc.get("native_id")), _s(conv.get("id"))
    return Row(key, source, native_id, sent_at, timestamp(sent_at), conv_id,
               _s(conv.get("name")), sender_id, _s(sender.get("name")), sender.get("is_me") is True, recipients_text,
               _s(extra.get("subject")), "\n".join(_attachment_names(attachments)), len(attachments),
               _s(doc.get("text")), doc.get("deleted") is True, _s(extra.get("search_text")),
               links(source, native_id, conv_id, extra))  # fmt: skip


def _attachment_names(attachments: list[dict[str, Any]]) -> list[str]:
    """The attachments' file names, then those inside each attached message (``message.filenames``), in order."""
    names = [n for a in attachments if (n := _s(a.get("filename")))]
    for a in attachments:
        inner = a.get("message")
        if type(inner) is dict:
            names += [n for n in _names(inner.get("filenames")) if n]
    return names


def revision_row(key: str, doc: dict[str, Any], message_key: str) -> RevisionRow:
    """The row of a revision record stored at ``key``, of the message stored at ``message_key``."""
    rev = doc.get("revision") if isinstance(doc.get("revision"), dict) else {}
    assert isinstance(rev, dict)
    kind = _s(rev.get("kind"))
    at = _s(rev.get("at")) or _s(doc.get("edited_at")) or _s(doc.get("sent_at"))
    text = doc.get("text") if kind in TEXT_KINDS and isinstance(doc.get("text"), str) else None
    return RevisionRow(key=key, message_key=message_key, kind=kind, at=at, text=text,
                       deleted=kind == "delete" or doc.get("deleted") is True)  # fmt: skip


def revision_parent(key: str) -> str | None:
    """The key of the original a revision key belongs to (``revisions/S/X/R.json`` -> ``messages/S/X.json``)."""
    parts = key.split("/")
    if len(parts) != 4 or parts[0] != "revisions":
        return None
    return f"messages/{parts[1]}/{parts[2]}.json"


def is_record_key(key: str) -> bool:
    """Whether ``key`` holds a record the index reads (an original or a revision; not a blob or quarantine)."""
    if not key.endswith(".json"):
        return False
    parts = key.split("/")
    return (parts[0] == "messages" and len(parts) == 3) or (parts[0] == "revisions" and len(parts) == 4)


def latest_text(revisions: list[RevisionRow]) -> str | None:
    """The text of the latest text-bearing revision (by time, then key), or None when none changed the text."""
    texts = [r for r in revisions if r.text is not None]
    if not texts:
        return None
    return max(texts, key=lambda r: (timestamp(r.at) or 0.0, r.key)).text


def time_id(ts: float | None, key: str) -> int:
    """A message's first-choice row id: its time in milliseconds (negative before 1970) times 1024 plus 10 bits of its
    key's hash, so that id order is time order (the FTS5 table then gives the newest matches first without sorting
    them all); a message with no time gets an id below :data:`FIRST_TIMED` (last). A taken id is replaced by a free
    one after it (:func:`free_ids`)."""
    spread = zlib.crc32(key.encode("utf-8", "surrogatepass"))
    if ts is None:
        return NO_TIME - spread
    return _ms(ts) * ID_SPREAD + (spread % ID_SPREAD)


def free_ids(wanted: list[int], taken: Callable[[list[int]], set[int]], highest: Callable[[int, int], int | None]) -> list[int]:
    """The row id each of ``wanted`` gets, in order: itself, or where it is taken (by an indexed message, or given to
    an earlier one of ``wanted``), the id after the highest one taken in its block of :data:`PROBE` ids (64 ms), from
    it to the block's end; when that is the block's end, the same in the next block. Both ways of adding rows (a poll's,
    a rebuild's) use it, so a record gets the same id either way.

    ``taken`` says which of some ids are indexed; ``highest(lo, hi)`` is the highest indexed id in ``lo <= id < hi``
    (None if none). One question per block, however many messages share a millisecond: moving up one id at a time
    asked once per message already there, and 100,000 mails with the same Date header (a migration that set them
    all) cost billions of queries.
    """
    used = taken(wanted)
    tops: dict[int, int] = {}  # block (id // PROBE) -> the highest id given in it so far
    ids = []
    for want in wanted:
        if want in used:
            want = _past_taken(want, tops, highest)
        used.add(want)
        block = want // PROBE
        if tops.get(block, want) <= want:
            tops[block] = want
        ids.append(want)
    return ids


def _past_taken(want: int, tops: dict[int, int], highest: Callable[[int, int], int | None]) -> int:
    """A free id at or after the taken ``want`` (:func:`free_ids`)."""
    while True:
        end = (want // PROBE + 1) * PROBE
        found = [t for t in (highest(want, end), tops.get(want // PROBE)) if t is not None and t >= want]
        if not found:
            return want
        if max(found) + 1 < end:
            return max(found) + 1
        want = end


def _ms(ts: float) -> int:
    """Milliseconds since the epoch, kept within the years 1 to 9999 (what a record's time can say)."""
    return min(max(int(ts * 1000), EARLIEST_MS), LATEST_MS)


def id_at(ts: float) -> int:
    """The lowest row id of a message sent at or after ``ts`` (after:/before:/date: become row id ranges)."""
    return _ms(ts) * ID_SPREAD
