"""A Gmail stand-in at the IMAP boundary: a proxy in front of Dovecot that speaks Gmail's extension ``X-GM-EXT-1``.

As Google's "IMAP Extensions" page documents it: ``X-GM-EXT-1`` is added to every capability list the server
sends (``* CAPABILITY ...`` and ``[CAPABILITY ...]``); LIST marks the mailboxes of :attr:`GmailProxy.special` with
their special-use attribute (RFC 6154, ``\\All`` for All Mail, whose name Gmail localises); a ``FETCH`` or ``UID FETCH`` asking for ``X-GM-MSGID``,
``X-GM-THRID`` or ``X-GM-LABELS`` gets them in each ``* n FETCH (...)`` answer (IDs as unsigned 64-bit decimals,
labels as a parenthesised list: system labels as ``\\Inbox``, ``\\Important``, ``\\Sent``, user labels as atoms or
quoted strings in modified UTF-7, ``()`` for none). Dovecot never sees those items (they are taken out of the
command), and answers everything else itself. Labels and thread IDs are set per UID by the test.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator

from tests.servers.imap_proxy import ImapProxy

MSGID_BASE = 1278455344230334865  # the X-GM-MSGID of UID 0 (Google's own example value); UID n gets base + n
_GM_ITEM = re.compile(rb" ?X-GM-(?:MSGID|THRID|LABELS)")
_LITERAL = re.compile(rb"\{(\d+)\}\r\n$")
_FETCH = re.compile(rb"^\* \d+ FETCH \(")
_UID = re.compile(rb"UID (\d+)")


def label_text(label: str) -> bytes:
    """One label as Gmail sends it: a system label or a plain atom as is, anything else quoted (modified UTF-7)."""
    from pollers.email.imap import utf7

    encoded = utf7.encode(label)
    if re.fullmatch(r"\\?[A-Za-z0-9_.&+-]+", encoded):
        return encoded.encode()
    return b'"' + encoded.replace("\\", "\\\\").replace('"', '\\"').encode() + b'"'


class GmailProxy(ImapProxy):
    """An :class:`ImapProxy` that adds Gmail's extension to Dovecot's answers."""

    def __init__(self, upstream_port: int) -> None:
        self.labels: dict[int, list[str]] = {}  # UID -> its labels
        self.threads: dict[int, int] = {}  # UID -> X-GM-THRID (default: its own X-GM-MSGID)
        self.special: dict[str, str] = {}  # mailbox name -> the special-use attribute LIST shows for it (Gmail: \\All, ...)
        self.asked = False  # the last FETCH asked for X-GM-* items
        self.commands: list[bytes] = []
        super().__init__(upstream_port)
        self.rewrite = self._command

    def msgid(self, uid: int) -> int:
        """The X-GM-MSGID the stand-in gives ``uid``."""
        return MSGID_BASE + uid

    def _command(self, line: bytes) -> bytes:
        self.commands.append(line)
        if b"FETCH" in line.upper() and b"X-GM-" in line.upper():
            self.asked = True
            return _GM_ITEM.sub(b"", line).replace(b"( ", b"(")
        return line

    def _answer(self, line: bytes) -> bytes:
        if line.startswith(b"* LIST ("):
            for name, attribute in self.special.items():
                if line.rstrip(b"\r\n").endswith((f'"{name}"'.encode(), f" {name}".encode())):
                    line = line.replace(b"* LIST (", b"* LIST (" + attribute.encode() + b" ", 1)
        if b"CAPABILITY" in line:
            line = re.sub(rb"(\* CAPABILITY [^\r\n]*)", rb"\1 X-GM-EXT-1", line)
            line = re.sub(rb"(\[CAPABILITY [^\]]*)\]", rb"\1 X-GM-EXT-1]", line)
        if self.asked and _FETCH.match(line) and (m := _UID.search(line)):
            uid = int(m.group(1))
            labels = b" ".join(label_text(label) for label in self.labels.get(uid, []))
            gm = b"X-GM-THRID %d X-GM-MSGID %d X-GM-LABELS (%s) " % (self.threads.get(uid, self.msgid(uid)), self.msgid(uid), labels)
            line = line.replace(b"FETCH (", b"FETCH (" + gm, 1)
        return line

    def _down(self, upstream: socket.socket, client: socket.socket) -> None:
        """Forward the server's answers line by line, literals untouched, rewriting lines as Gmail would send them."""
        with contextlib.suppress(OSError), upstream.makefile("rb") as lines:
            while line := lines.readline():
                client.sendall(self._answer(line))
                m = _LITERAL.search(line)
                if m:
                    client.sendall(lines.read(int(m.group(1))))
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def gmail_proxy(upstream_port: int) -> Iterator[GmailProxy]:
    """A :class:`GmailProxy` for the duration of the block."""
    proxy = GmailProxy(upstream_port)
    try:
        yield proxy
    finally:
        proxy.close()
