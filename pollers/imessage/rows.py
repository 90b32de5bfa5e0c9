"""chat.db values to record fields: Apple dates, text that is not UTF-8, attachments, and one row as a record."""

from __future__ import annotations

import base64
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from memex.plugin import Attachment, Content, Conversation, Message, Sender, rfc3339
from pollers.imessage.typedstream import decode_attributed_body, salvage_text

APPLE_EPOCH = datetime(2001, 1, 1, tzinfo=UTC)
NANOSECOND_THRESHOLD = 100_000_000_000  # dates above ~1e11 are nanoseconds (macOS 10.13+)
REACTIONS = {0: "love", 1: "like", 2: "dislike", 3: "laugh", 4: "emphasize", 5: "question"}


def apple_time(value: int | None) -> datetime | None:
    """Convert a chat.db date (seconds or nanoseconds since 2001-01-01 UTC) to a datetime; 0/NULL is None."""
    if not value:
        return None
    if abs(value) > NANOSECOND_THRESHOLD:
        return APPLE_EPOCH + timedelta(microseconds=value // 1000)
    return APPLE_EPOCH + timedelta(seconds=value)


def iso_time(value: int | None) -> str | None:
    """A chat.db date as RFC 3339 UTC, or None."""
    dt = apple_time(value)
    return rfc3339(dt) if dt else None


class BadText(str):
    """Text that was not valid UTF-8 in chat.db: decoded with U+FFFD in place of the bad bytes, ``raw`` kept."""

    raw: bytes


def tolerant_text(value: bytes) -> str:
    """A ``text_factory`` that never raises: valid UTF-8 as ``str``, anything else as :class:`BadText`."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        text = BadText(value.decode("utf-8", "replace"))
        text.raw = value
        return text


def attachment_content(index: int, filename: str | None) -> Content:
    """The bytes of an attachment file (``attachment.filename``, ``~`` expanded), opened only when stored.

    A file that is not there (iCloud "optimize storage" keeps only some; no filename at all) makes the
    attachment ``missing``, never an error.
    """

    def open_file() -> IO[bytes]:
        if not filename:
            raise FileNotFoundError("no filename")
        path = Path(filename).expanduser()
        if not path.is_file():
            raise FileNotFoundError(str(path))
        return path.open("rb")

    return Content(index=index, open=open_file)


def read_all(conn: sqlite3.Connection, sql: str, args: Any = ()) -> list[Any]:
    """All rows of a query; one TEXT value that is not valid UTF-8 affects only its own row, never the query.

    sqlite3 fails the whole fetch on such a value (a half emoji, as real databases hold), quoting it in the
    exception: the query is then read again decoding each value with :func:`tolerant_text`.
    """
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError:
        conn.text_factory = tolerant_text
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.text_factory = str


def strip_target(guid: str | None) -> str | None:
    """``p:0/GUID`` or ``bp:GUID`` (a tapback's target) to the bare message guid."""
    if not guid:
        return None
    if "/" in guid and guid.startswith("p:"):
        return guid.split("/", 1)[1]
    if guid.startswith("bp:"):
        return guid[3:]
    return guid


@dataclass
class Chat:
    """A chat: its guid, name and participants' handles."""

    guid: str
    name: str | None
    participants: list[str]


def render_message(source: str, r: dict[str, Any], chat: Chat | None, attachments: list[Attachment]) -> Message:
    """One ``message`` row (columns by name, ``handle`` joined) as a record; text from ``attributedBody`` when ``text`` is NULL."""
    extra: dict[str, Any] = {}
    bad = sorted(k for k, v in r.items() if isinstance(v, BadText))
    if bad:  # kept losslessly, for a later `backfill --rewrite` with a better decoder
        extra["raw_bytes_b64"] = {k: base64.b64encode(r[k].raw).decode("ascii") for k in bad}
        extra["problems"] = [f"{k} is not valid UTF-8; bad bytes shown as U+FFFD" for k in bad]
    text = r.get("text")
    body = r.get("attributedBody")
    if text is None and body:
        try:
            text = decode_attributed_body(bytes(body))
            extra["text_from"] = "attributedBody"
        except ValueError as exc:
            extra["text_error"] = str(exc)  # our own parser's words: type and place, never the text
            text = salvage_text(bytes(body))
            if text is not None:  # the readable start; the whole blob is kept beside the record
                extra["text_from"] = "attributedBody (partial)"
                extra["text_partial"] = True
    assoc_type = r.get("associated_message_type") or 0
    kind = "message"
    reply_to = r.get("thread_originator_guid") or None
    if 2000 <= assoc_type <= 2005 or 3000 <= assoc_type <= 3005:
        kind = "reaction"
        reply_to = strip_target(r.get("associated_message_guid"))
        extra["reaction"] = {"kind": REACTIONS.get(assoc_type % 1000, str(assoc_type)), "removed": assoc_type >= 3000}
    elif r.get("item_type"):
        kind = "event"
    for key in ("service", "item_type", "associated_message_guid", "associated_message_type", "balloon_bundle_id",
                "reply_to_guid", "thread_originator_guid", "group_title", "subject"):  # fmt: skip
        value = r.get(key)
        if value not in (None, 0, ""):
            extra[key] = value
    for key in ("date_read", "date_delivered"):
        if r.get(key):
            extra[key] = iso_time(r[key])
    is_me = bool(r.get("is_from_me"))
    sender = Sender(id=(r.get("destination_caller_id") or None) if is_me else r.get("handle"), name=None, is_me=is_me)
    conversation = (
        Conversation(id=chat.guid, name=chat.name, participants=list(chat.participants))
        if chat
        else Conversation(id=None, name=None, participants=[r["handle"]] if r.get("handle") else [])
    )
    return Message(
        source=source,
        type=kind,
        native_id=r["guid"],
        sent_at=iso_time(r.get("date")),
        conversation=conversation,
        sender=sender,
        text=text,
        attachments=attachments,
        reply_to=reply_to,
        edited_at=iso_time(r.get("date_edited")),
        deleted=bool(r.get("date_retracted")),
        extra=extra,
    )


def apple_nanoseconds(when: datetime) -> int:
    """``when`` as exact nanoseconds since 2001-01-01 UTC (naive datetimes are taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return ((when - APPLE_EPOCH) // timedelta(microseconds=1)) * 1000


def date_filter(since: datetime | None, until: datetime | None) -> tuple[str, list[int]]:
    """SQL (``AND ...``) and parameters keeping rows whose ``date`` is in ``[since, until)``.

    A table mixes second-resolution dates (before macOS 10.13) and
    nanosecond ones; each row is compared in its own unit, exactly, with
    integers: for whole seconds ``d >= x`` is ``d >= ceil(x)``, and
    ``d < x`` is ``d < ceil(x)``. Rows without a date are left out of a
    bounded range.
    """
    if since is None and until is None:
        return "", []
    sql = " AND m.date IS NOT NULL AND m.date != 0"
    params: list[int] = []
    for bound, op in ((since, ">="), (until, "<")):
        if bound is None:
            continue
        ns = apple_nanoseconds(bound)
        seconds = -(-ns // 1_000_000_000)
        big = f"abs(m.date) > {NANOSECOND_THRESHOLD}"
        sql += f" AND (({big} AND m.date {op} ?) OR (NOT {big} AND m.date {op} ?))"
        params += [ns, seconds]
    return sql, params
