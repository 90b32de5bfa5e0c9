"""IMAP on the wire: quoting names, UID sets and dates for commands, and reading the server's replies.

Pure functions of what imaplib hands back (no connection is opened here), shared by the
IMAP session (:mod:`pollers.email.imap.session`) and the poller (:mod:`pollers.email.imap.poller`).
"""

from __future__ import annotations

import fnmatch
import imaplib
import re
from datetime import UTC, datetime
from typing import Any

from pollers.email.imap import utf7

_UID_RE = re.compile(rb"(?<![-\w])UID (\d+)")
_DATE_RE = re.compile(rb'INTERNALDATE "([^"]+)"')
_LIST_RE = re.compile(rb'^\((?P<flags>[^)]*)\) (?P<delim>"(?:[^"\\]|\\.)*"|NIL) (?P<name>.*)$')


def quote(name: str) -> str:
    """A mailbox name as an IMAP quoted string."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def reply_text(data: Any) -> str:
    """A server reply as one short line."""
    if isinstance(data, list | tuple):
        data = b" ".join(d if isinstance(d, bytes) else str(d).encode() for d in data if d is not None)
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return " ".join(str(data).split())[:200]


def server_text(exc: BaseException) -> str:
    """What the server said in an imaplib error, as one short line."""
    return reply_text(exc.args[0] if exc.args else type(exc).__name__)


def untagged_int(conn: imaplib.IMAP4, name: str) -> int | None:
    """The number of the last command's untagged ``name`` response (UIDVALIDITY, UIDNEXT), or None if none was sent."""
    _, values = conn.response(name)
    for value in values or []:
        if value is None:
            continue
        text = value.decode() if isinstance(value, bytes) else str(value)
        try:
            return int(text.strip().split()[0])
        except (ValueError, IndexError):
            continue
    return None


def ints(data: list[Any]) -> list[int]:
    """The numbers of a SEARCH reply."""
    out: list[int] = []
    for line in data:
        if isinstance(line, bytes):
            out.extend(int(x) for x in line.split() if x.isdigit())
    return out


def uid_set(uids: list[int]) -> str:
    """A compact UID set: ``1:5,7,9:12``."""
    parts: list[str] = []
    run_start = prev = uids[0]
    for u in uids[1:]:
        if u == prev + 1:
            prev = u
            continue
        parts.append(f"{run_start}:{prev}" if prev != run_start else str(run_start))
        run_start = prev = u
    parts.append(f"{run_start}:{prev}" if prev != run_start else str(run_start))
    return ",".join(parts)


FETCH_ITEMS = "(UID INTERNALDATE BODY.PEEK[])"
GMAIL_FETCH_ITEMS = "(UID INTERNALDATE X-GM-MSGID X-GM-THRID X-GM-LABELS BODY.PEEK[])"  # a server advertising X-GM-EXT-1


def parse_fetch(
    data: list[Any], uids: list[int], gmail: dict[int, dict[str, Any]] | None = None
) -> list[tuple[int, bytes, datetime | None]]:
    """``(uid, raw bytes, INTERNALDATE)`` of each of ``uids`` that a ``UID FETCH (UID INTERNALDATE BODY.PEEK[])`` reply holds, by UID.

    With ``gmail`` (a dict), each UID's Gmail fields (``X-GM-MSGID``, ``X-GM-THRID``, ``X-GM-LABELS``, before or
    after the literal) are put there as :func:`pollers.email.imap.gmail.fields` reads them.
    """
    wanted = set(uids)
    out: dict[int, tuple[bytes, datetime | None]] = {}
    for index, element in enumerate(data):
        if not isinstance(element, tuple):
            continue
        head = element[0]
        after = data[index + 1] if index + 1 < len(data) else None
        if isinstance(after, bytes):
            head = head + after  # UID, INTERNALDATE or the Gmail fields may come after the literal
        if gmail is not None:
            from pollers.email.imap.gmail import fields, without_labels

            found = fields(head)
            head = without_labels(head)  # a label's text must never be read as the UID
        m = _UID_RE.search(head)
        if m is None:
            continue
        uid = int(m.group(1))
        if uid in wanted and uid not in out:
            d = _DATE_RE.search(head)
            out[uid] = (element[1], internaldate(d.group(1)) if d else None)
            if gmail is not None and found:
                gmail[uid] = found
    return [(u, *out[u]) for u in sorted(out)]


def internaldate(value: bytes) -> datetime | None:
    """An INTERNALDATE (``17-Jul-1996 02:44:25 -0700``) in UTC, or None if it cannot be read."""
    try:
        return datetime.strptime(value.decode(), "%d-%b-%Y %H:%M:%S %z").astimezone(UTC)
    except ValueError:
        return None


def imap_day(dt: datetime) -> str:
    """A day as SEARCH's date criteria take it: ``1-Feb-2024``."""
    months = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    return f"{dt.day}-{months[dt.month - 1]}-{dt.year}"


def parse_list(line: Any) -> str | None:
    """The mailbox name of one LIST reply line, or None for \\Noselect or unparseable lines."""
    entry = list_entry(line)
    return entry[0] if entry is not None else None


def list_entry(line: Any) -> tuple[str, frozenset[str]] | None:
    """The mailbox name and attributes (lower case: ``\\all``, ``\\sent``) of one LIST reply line, or None for
    \\Noselect, \\NonExistent or unparseable lines."""
    if isinstance(line, tuple):  # name sent as a literal
        head, name_bytes = line[0], line[1]
        flags = frozenset(f.decode("utf-8", "replace") for f in re.findall(rb"\\[A-Za-z]+", head.lower()))
        if "\\noselect" in flags:
            return None
        return str(name_bytes.decode("utf-8", "replace")), flags
    if not isinstance(line, bytes):
        return None
    m = _LIST_RE.match(line)
    if m is None:
        return None
    flags = frozenset(m.group("flags").decode("utf-8", "replace").lower().split())
    if "\\noselect" in flags or "\\nonexistent" in flags:
        return None
    name = m.group("name")
    if name.startswith(b'"') and name.endswith(b'"'):
        name = re.sub(rb"\\(.)", rb"\1", name[1:-1])
    return name.decode("utf-8", "replace"), flags


def select_mailboxes(entries: list[tuple[str, frozenset[str]]], patterns: tuple[str, ...]) -> list[str]:
    """The LIST ``entries`` (name, attributes) that ``patterns`` select, sorted: a name matches itself (even one
    that reads as a glob, like ``[Gmail]/All Mail``), a glob its matches (raw or decoded from modified UTF-7), a
    special-use attribute (``\\All``) the mailboxes marked with it."""

    def matches(name: str, flags: frozenset[str], pattern: str) -> bool:
        if pattern.startswith("\\") and pattern[1:].isalpha():
            return pattern.lower() in flags
        shown = utf7.decode(name)
        return pattern in (name, shown) or fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(shown, pattern)

    return sorted({n for n, flags in entries for p in patterns if matches(n, flags, p)})
