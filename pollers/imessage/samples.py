"""Realistic chat.db files in the real schema, for the demo, the tests and the benchmarks.

The DDL is macOS's own (table and column names and types, the indexes the
poller relies on); texts are made up from a word list, never real messages.
About a third of the rows keep their text only in ``attributedBody`` (as
recent macOS does), older rows use second-resolution dates, newer ones
nanoseconds; there are group chats, tapbacks, replies and attachments.
"""

from __future__ import annotations

import math
import random
import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from pollers.imessage.typedstream import encode_attributed_body

SCHEMA = """
CREATE TABLE handle(ROWID INTEGER PRIMARY KEY AUTOINCREMENT UNIQUE, id TEXT NOT NULL, country TEXT, service TEXT NOT NULL, uncanonicalized_id TEXT, person_centric_id TEXT DEFAULT NULL);
CREATE TABLE chat(ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, style INTEGER, state INTEGER, account_id TEXT, properties BLOB, chat_identifier TEXT, service_name TEXT, room_name TEXT, display_name TEXT, group_id TEXT);
CREATE TABLE message(ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, text TEXT, handle_id INTEGER DEFAULT 0, subject TEXT, attributedBody BLOB, service TEXT, account TEXT, date INTEGER, date_read INTEGER, date_delivered INTEGER, is_from_me INTEGER DEFAULT 0, is_read INTEGER DEFAULT 0, cache_has_attachments INTEGER DEFAULT 0, item_type INTEGER DEFAULT 0, group_title TEXT, associated_message_guid TEXT DEFAULT NULL, associated_message_type INTEGER DEFAULT 0, balloon_bundle_id TEXT DEFAULT NULL, payload_data BLOB, message_summary_info BLOB DEFAULT NULL, destination_caller_id TEXT, reply_to_guid TEXT, thread_originator_guid TEXT, date_retracted INTEGER, date_edited INTEGER);
CREATE TABLE attachment(ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, created_date INTEGER DEFAULT 0, filename TEXT, uti TEXT, mime_type TEXT, transfer_name TEXT, total_bytes INTEGER DEFAULT 0, is_outgoing INTEGER DEFAULT 0);
CREATE TABLE chat_message_join(chat_id INTEGER REFERENCES chat(ROWID) ON DELETE CASCADE, message_id INTEGER REFERENCES message(ROWID) ON DELETE CASCADE, message_date INTEGER DEFAULT 0, PRIMARY KEY(chat_id, message_id));
CREATE TABLE chat_handle_join(chat_id INTEGER REFERENCES chat(ROWID) ON DELETE CASCADE, handle_id INTEGER REFERENCES handle(ROWID) ON DELETE CASCADE, UNIQUE(chat_id, handle_id));
CREATE TABLE message_attachment_join(message_id INTEGER REFERENCES message(ROWID) ON DELETE CASCADE, attachment_id INTEGER REFERENCES attachment(ROWID) ON DELETE CASCADE, UNIQUE(message_id, attachment_id));
CREATE INDEX chat_message_join_idx_message_id_only ON chat_message_join(message_id);
CREATE INDEX message_attachment_join_idx_message_id ON message_attachment_join(message_id);
CREATE INDEX message_idx_handle ON message(handle_id, date);
"""

APPLE_EPOCH_UNIX = 978307200
WORDS = [
    "ok",
    "sure",
    "tomorrow",
    "dinner",
    "train",
    "late",
    "coffee",
    "meeting",
    "call",
    "later",
    "thanks",
    "great",
    "see",
    "you",
    "soon",
    "running",
    "home",
    "weekend",
    "plan",
    "tickets",
    "photo",
    "birthday",
    "movie",
    "lunch",
    "park",
    "rain",
    "sunny",
    "traffic",
    "boarding",
    "gate",
    "call",
    "me",
    "back",
    "love",
    "it",
    "haha",
    "nice",
    "done",
    "sent",
    "address",
    "parking",
    "keys",
    "groceries",
    "milk",
    "bread",
]
NAMES = ["+15550100", "+15550101", "+15550102", "alex@example.com", "sam@example.com", "+447700900123", "+15550103"]


def apple_date(when: datetime, *, nanoseconds: bool = True) -> int:
    """A chat.db ``date`` for ``when``: nanoseconds (macOS 10.13+) or seconds since 2001."""
    seconds = when.timestamp() - APPLE_EPOCH_UNIX
    return int(seconds * 1_000_000_000) if nanoseconds else int(seconds)


def create(path: Path, *, wal: bool = True) -> sqlite3.Connection:
    """Create an empty chat.db with the real schema (WAL mode like Messages.app) and return a connection."""
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    return conn


@dataclass
class SampleChats:
    """Handles and chats already in a sample db."""

    handles: list[int]
    chats: list[tuple[int, list[int]]]  # chat ROWID, member handle ROWIDs


def add_chats(conn: sqlite3.Connection) -> SampleChats:
    """Add handles, three 1:1 chats and two group chats."""
    handles = []
    for ident in NAMES:
        cur = conn.execute("INSERT INTO handle(id, service) VALUES (?, 'iMessage')", (ident,))
        handles.append(int(cur.lastrowid or 0))
    chats = []
    layout = [([0], None), ([1], None), ([3], None), ([0, 1, 2], "Family"), ([2, 4, 5, 6], "Climbing crew")]
    for members, title in layout:
        guid = f"iMessage;{'+' if title else '-'};chat{uuid.uuid4().int % 10**12}"
        cur = conn.execute(
            "INSERT INTO chat(guid, style, chat_identifier, service_name, display_name) VALUES (?, ?, ?, 'iMessage', ?)",
            (guid, 43 if title else 45, guid.split(";")[-1] if title else NAMES[members[0]], title),
        )
        chat_id = int(cur.lastrowid or 0)
        member_ids = [handles[i] for i in members]
        for h in member_ids:
            conn.execute("INSERT INTO chat_handle_join(chat_id, handle_id) VALUES (?, ?)", (chat_id, h))
        chats.append((chat_id, member_ids))
    return SampleChats(handles, chats)


def existing_chats(conn: sqlite3.Connection) -> SampleChats:
    """Read back the handles and chats of a sample db."""
    handles = [r[0] for r in conn.execute("SELECT ROWID FROM handle ORDER BY ROWID")]
    chats = []
    for (chat_id,) in conn.execute("SELECT ROWID FROM chat ORDER BY ROWID").fetchall():
        members = [r[0] for r in conn.execute("SELECT handle_id FROM chat_handle_join WHERE chat_id = ?", (chat_id,))]
        chats.append((chat_id, members))
    return SampleChats(handles, chats)


def sample_text(rng: random.Random) -> str:
    """A short made-up message."""
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
    if rng.random() < 0.1:
        text += rng.choice([" 👍", " 🎉", " é à ü", " 🙂"])
    return text.capitalize()


def rows(count: int, *, seed: int = 1, start: datetime | None = None, step_seconds: float = 97.0,
         attributed_share: float = 0.35) -> Iterator[dict[str, object]]:  # fmt: skip
    """Yield ``count`` message rows (as column dicts) in time order, deterministic for a seed."""
    rng = random.Random(seed)
    when = start or datetime(2016, 3, 1, tzinfo=UTC)
    recent: list[str] = []
    for i in range(count):
        when = datetime.fromtimestamp(when.timestamp() + rng.expovariate(1 / step_seconds), UTC)
        guid = str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper()
        nanoseconds = when.year >= 2018
        row: dict[str, object] = {
            "guid": guid,
            "date": apple_date(when, nanoseconds=nanoseconds),
            "is_from_me": int(rng.random() < 0.45),
            "service": "iMessage",
            "chat_index": rng.randrange(5),
            "sender_index": rng.randrange(3),
        }
        roll = rng.random()
        if recent and roll < 0.06:
            row["associated_message_guid"] = f"p:0/{rng.choice(recent)}"
            row["associated_message_type"] = 2000 + rng.randrange(6)
            row["text"] = None
        else:
            text = sample_text(rng)
            if rng.random() < attributed_share:
                row["text"] = None
                row["attributedBody"] = encode_attributed_body(text)
            else:
                row["text"] = text
                if nanoseconds:
                    row["attributedBody"] = encode_attributed_body(text)
            if recent and roll < 0.1:
                row["thread_originator_guid"] = rng.choice(recent)
            if roll > 0.96:
                row["attachment"] = rng.choice(
                    [(f"IMG_{i:04d}.HEIC", "image/heic"), ("voice.caf", "audio/x-caf"), ("doc.pdf", "application/pdf")]
                )
        recent = [guid, *recent[:20]]
        yield row
        del i


def insert(conn: sqlite3.Connection, chats: SampleChats, batch: Iterator[dict[str, object]] | list[dict[str, object]]) -> int:
    """Insert rows from :func:`rows` (in one transaction); return how many."""
    n = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        for row in batch:
            chat_id, members = chats.chats[int(row.pop("chat_index")) % len(chats.chats)]  # type: ignore[call-overload]
            sender = members[int(row.pop("sender_index")) % len(members)]  # type: ignore[call-overload]
            attachment = row.pop("attachment", None)
            row["handle_id"] = 0 if row["is_from_me"] and len(members) > 1 else sender
            row["cache_has_attachments"] = int(attachment is not None)
            cols = ", ".join(row)
            cur = conn.execute(f"INSERT INTO message({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
            mid = int(cur.lastrowid or 0)
            conn.execute("INSERT INTO chat_message_join(chat_id, message_id, message_date) VALUES (?, ?, ?)", (chat_id, mid, row["date"]))
            if attachment is not None:
                name, mime = cast(tuple[str, str], attachment)
                acur = conn.execute(
                    "INSERT INTO attachment(guid, filename, mime_type, transfer_name, total_bytes) VALUES (?, ?, ?, ?, ?)",
                    (str(uuid.uuid4()).upper(), f"~/Library/Messages/Attachments/{name}", mime, name, 1000 + mid),
                )
                conn.execute("INSERT INTO message_attachment_join(message_id, attachment_id) VALUES (?, ?)", (mid, acur.lastrowid))
            n += 1
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return n


def ending_by(batch: Iterable[dict[str, object]], end: datetime) -> list[dict[str, object]]:
    """The rows of ``batch`` with every date moved back by one amount, so that the newest is at ``end`` at the latest.

    The gaps between messages are random (exponential), so a history started ``count`` mean gaps ago can end well
    after ``start + count * step``: without this the demo's newest messages were dated about half an hour ahead.
    """
    listed = list(batch)
    newest = max((_unix(int(cast(int, r["date"]))) for r in listed), default=None)
    if newest is None or newest <= end.timestamp():
        return listed
    back = newest - end.timestamp()
    for row in listed:
        date = int(cast(int, row["date"]))
        row["date"] = date - (math.ceil(back * 1_000_000_000) if date > NANOSECOND_DATES else math.ceil(back))
    return listed


NANOSECOND_DATES = 100_000_000_000  # a chat.db date above this counts nanoseconds, else seconds (since 2001)


def _unix(date: int) -> float:
    """A chat.db ``date`` (seconds or nanoseconds since 2001) as Unix time."""
    return (date / 1e9 if date > NANOSECOND_DATES else date) + APPLE_EPOCH_UNIX


def build(path: Path, count: int, *, seed: int = 1, wal: bool = True, start: datetime | None = None, end: datetime | None = None) -> None:
    """Write a fresh chat.db with ``count`` messages at ``path`` (with ``end``: none dated after it)."""
    conn = create(path, wal=wal)
    try:
        chats = add_chats(conn)
        batch = rows(count, seed=seed, start=start)
        insert(conn, chats, batch if end is None else ending_by(batch, end))
    finally:
        conn.close()


def append(path: Path, count: int, *, seed: int, start: datetime | None = None) -> int:
    """Add ``count`` new messages to an existing sample chat.db (as Messages.app would).

    Without ``start`` they are dated in the last moments before now (after the newest one there when it is older),
    never in the future.
    """
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        if start is not None:
            return insert(conn, existing_chats(conn), rows(count, seed=seed, start=start, step_seconds=5))
        now = datetime.now(UTC)
        (latest,) = conn.execute("SELECT MAX(date) FROM message").fetchone()
        begin = now.timestamp() - 10 * count  # twice the mean gap per message
        if latest:
            begin = max(begin, _unix(int(latest)))
        batch = rows(count, seed=seed, start=datetime.fromtimestamp(begin, UTC), step_seconds=5)
        return insert(conn, existing_chats(conn), ending_by(batch, now))
    finally:
        conn.close()
