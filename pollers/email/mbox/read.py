"""Splitting an mbox file into mails, streamed in chunks: the variants, ``>From `` unquoting, Google Takeout's headers.

A mail starts at a separator line ``From <sender> <date>`` (the "From_ line"). A line counts as a separator only
if it is at the start of the file or of a line (a NUL byte counts as a line end: a crashed writer leaves NUL runs
where a line end was), carries an ``asctime`` date (weekday, month, day, hh:mm: every writer puts one there,
Takeout as ``Tue Aug 08 12:36:29 +0000 2023``, Pipermail as ``From jgb at example.com  Thu Apr 14 ...``) and is
followed by a header line. A ``From `` line in a body that its writer did not quote therefore stays in the mail
(counted, :attr:`Mail.unquoted`) unless it looks exactly like a separator followed by a header.

Variants (``variant`` of an ``mbox`` source):

- ``mboxrd``: every ``>*From `` line of a body got one more ``>``; one is taken off each ``>+From `` line: exact.
- ``mboxo``: only ``From `` got a ``>``; ``>From `` becomes ``From `` again. Ambiguous by design: a body line that
  was ``>From `` to begin with loses its ``>`` too (the rarer case; the other choice, leaving every quoted line
  quoted, would turn every mail with a ``From `` line into another mail than the one a server sends).
- ``mboxcl``: a ``Content-Length:`` header gives the body's length, and bodies are quoted as in mboxo.
- ``mboxcl2``: a ``Content-Length:`` header gives the body's length; nothing is quoted, so nothing is unquoted.
- ``auto`` (the default): a ``Content-Length`` that lands exactly on the next separator (or the end of the file)
  is followed and the body left as it is (mboxcl2); otherwise mails end at the next separator and are unquoted
  by the mboxrd rule, which is mboxo's for every ``>From `` line and differs only for ``>>From `` (rare).

A file whose lines end with a lone CR (classic Mac OS mail programs, Eudora: :func:`cr_only`, judged from its first
4 KiB) is read with each CR taken as LF (one byte for one, so offsets are the file's); its mails are stored with LF
line ends. Separator dates are asctime's or RFC 2822's (``From daemon@host Sun, 11 Nov 2007 06:58:35 +0200``).

In every variant a ``Content-Length`` that does not land on a separator is ignored (one problem noted on the mail).
The From_ line is not part of the mail, nor is the blank line a writer puts before the next separator.

Memory: the reader holds one chunk (:data:`CHUNK`) plus the current mail; a mail longer than :data:`MAX_MAIL` is
not held (:attr:`Mail.too_big`: its first :data:`KEEP_OF_BIG` bytes are kept for quarantine and the rest passed).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

CHUNK = 1 << 20
MAX_MAIL = 64 << 20  # Gmail caps a mail at 50 MB: a longer "mail" is a file that is not (or no longer) an mbox
KEEP_OF_BIG = 1 << 20
KEEP_BEFORE = 64 << 10  # bytes kept before the current mail, so the bytes before a mail's end are at hand
HEADER_LIMIT = 1 << 20  # a header block longer than this has no Content-Length worth following
MAX_LINE = 4096  # a separator line longer than this is not one
VARIANTS = ("auto", "mboxrd", "mboxo", "mboxcl", "mboxcl2")

_WEEKDAY = rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? +"
_MONTH = rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
_DATE = re.compile(  # asctime's "Tue Aug  8 12:36", or RFC 2822's "Sun, 11 Nov 2007 06:58" (some Exim set-ups write it)
    _WEEKDAY + rb"(?:" + _MONTH + rb" +\d{1,2},? +\d{1,2}:\d\d|\d{1,2} +" + _MONTH + rb" +\d{2,4} +\d{1,2}:\d\d)"
)
_HEADER = re.compile(rb"[!-9;-~]+[ \t]*:")  # a field name (RFC 5322: printable ASCII but colon) and its colon
_RD = re.compile(rb"^>(>*From )", re.M)
_O = re.compile(rb"^>(From )", re.M)
_LENGTH = re.compile(rb"^content-length:[ \t]*(\d{1,12})[ \t]*\r?$", re.M | re.I)
_TAKEOUT = (b"x-gm-thrid:", b"x-gmail-labels:")
_BLANK = re.compile(rb"\n\r?\n")  # the end of a header block
_LEAD = re.compile(rb"[\r\n\0]*")  # what may come between one mail and the next separator


@dataclass(slots=True)
class Mail:
    """One mail of an mbox file: where it is, its separator line and its bytes as the writer was given them."""

    start: int  # offset of its From_ line
    end: int  # offset just past it: the next From_ line (or the end of the file)
    envelope: bytes  # the From_ line after "From ", without its line end
    raw: bytes  # the mail, unquoted, without the From_ line and the blank line before the next one
    last: bool = False  # nothing follows it (the end of the file): it may still be being written
    unquoted: int = 0  # "From " lines left in its body that its writer did not quote
    unquoted_at: int = -1  # the file offset of the first of them
    nul_bytes: int = 0  # NUL bytes cut from its end (a crash's leftover)
    too_big: bool = False  # longer than MAX_MAIL: ``raw`` is only its beginning
    cr: bool = False  # its file ends lines with a lone CR: ``raw`` has LF where the file has CR
    problems: list[str] = field(default_factory=list)


def is_separator(line: bytes) -> bool:
    """Whether ``line`` (starting ``From ``, without its line end) carries a separator's date."""
    return len(line) <= MAX_LINE and _DATE.search(line, 5) is not None


def _blank_end(data: bytes) -> int:
    """How many bytes of the blank line a writer puts before the next separator end ``data`` (0 if none)."""
    if data.endswith(b"\r\n\r\n"):
        return 2
    if data.endswith(b"\n\n") or data.endswith(b"\r\n\n"):
        return 1
    return 0


def unquote(raw: bytes, variant: str) -> bytes:
    """The body lines ``>From `` (and ``>>From `` ...) given back the ``From `` their writer quoted, by ``variant``."""
    if variant == "mboxcl2" or b">From " not in raw:
        return raw
    return (_O if variant in ("mboxo", "mboxcl") else _RD).sub(rb"\1", raw)


def starts_mbox(head: bytes) -> bool:
    """Whether a file's first bytes are an mbox's: blank lines at most, then a separator line (its line ending in
    LF, CRLF or a lone CR: :func:`cr_only`)."""
    head = head.lstrip(b" \t\r\n")
    if not head.startswith(b"From "):
        return False
    line = re.split(b"[\r\n]", head, maxsplit=1)[0]
    return is_separator(line) or not re.search(b"[\r\n]", head)


def cr_only(head: bytes) -> bool:
    """Whether a file's first bytes end their lines with a lone CR (classic Mac OS, Eudora): CRs and not one LF."""
    return b"\r" in head and b"\n" not in head


class Reader:
    """The mails of one open mbox file from ``offset`` (a separator's start, or the end), in order.

    Positions are indexes into ``buf``; ``off`` is where the current mail starts. The buffer is cut down to the
    current mail only between mails, once ``off`` has passed a chunk, so each byte is copied a bounded number of times.
    """

    def __init__(self, fh: BinaryIO, offset: int, variant: str = "auto", chunk: int = CHUNK) -> None:
        self.fh = fh
        self.variant = variant
        self.chunk = chunk
        self.buf = b""
        self.base = offset  # file offset of buf[0]
        self.off = 0
        self.eof = False
        self.first_unquoted = -1  # the file offset of the first unquoted "From " line of the mail being split
        self.max_mail = MAX_MAIL
        fh.seek(0)
        self.cr = cr_only(fh.read(4096))  # lone CRs end the lines: each read as LF (the same length)
        fh.seek(offset)

    def _more(self) -> bool:
        """Read one more chunk onto the buffer; False at the end of the file."""
        if self.eof:
            return False
        data = self.fh.read(self.chunk)
        if not data:
            self.eof = True
            return False
        self.buf += data.replace(b"\r", b"\n") if self.cr else data
        return True

    def _compact(self) -> None:
        """Forget the buffer before the current mail but its last KEEP_BEFORE bytes (for :meth:`before`)."""
        cut = self.off - KEEP_BEFORE
        if cut > 0:
            self.buf = self.buf[cut:]
            self.base += cut
            self.off -= cut

    def before(self, end: int, n: int) -> bytes:
        """The ``n`` bytes before file offset ``end`` (fewer at the start of the file): from the buffer when it holds
        them (it keeps KEEP_BEFORE bytes before the current mail), else read from the file; always the file's bytes
        (a CR-only file's CRs as they are)."""
        start = max(0, end - n)
        if not self.cr and start >= self.base and end <= self.base + len(self.buf):
            return self.buf[start - self.base : end - self.base]
        at = self.fh.tell()
        try:
            self.fh.seek(start)
            return self.fh.read(end - start)
        finally:
            self.fh.seek(at)

    def _line_end(self, pos: int) -> int:
        """The index of the LF ending the line at ``pos`` (reading on as needed), or -1 if the file ends first."""
        while True:
            nl = self.buf.find(b"\n", pos, pos + MAX_LINE + 1)
            if nl >= 0 or len(self.buf) - pos > MAX_LINE:
                return nl
            if not self._more():
                return -1

    def _separator_at(self, pos: int) -> bool:
        """Whether a separator line starts at ``pos`` (``From ``, a date, and a header line or the end after it)."""
        nl = self._line_end(pos)
        if nl < 0:
            return False
        if not is_separator(self.buf[pos:nl].rstrip(b"\r")):
            return False
        nxt = nl + 1
        while len(self.buf) - nxt < 256 and self._more():
            pass
        following = self.buf[nxt : nxt + 256]
        return not following or _HEADER.match(following) is not None or following.startswith(b">From ")

    def _next_separator(self, pos: int, limit: int | None = None) -> tuple[int, int, int]:
        """The next separator at or after ``pos``, the unquoted ``From `` lines passed and the quoted ``>+From `` lines
        passed (-1: the file ends first, -2: the mail grew past ``limit`` first). One scan for ``From `` finds all
        three: what comes before each hit (a line end or NUL, a run of ``>`` from a line start, anything else) says
        which."""
        unquoted = quoted = 0
        buf = self.buf
        while True:
            i = buf.find(b"From ", pos)
            if i < 0:
                if len(buf) - self.off > (self.max_mail if limit is None else limit):
                    return -2, unquoted, quoted
                pos = max(pos, len(buf) - 4)
                if not self._more():
                    return -1, unquoted, quoted
                buf = self.buf
                continue
            before = buf[i - 1] if i else 10
            if before in (10, 0):  # at a line start (a NUL stands for a lost line end)
                if self._separator_at(i):
                    return i, unquoted, quoted
                buf = self.buf
                unquoted += 1
                if self.first_unquoted < 0:
                    self.first_unquoted = self.base + i
            elif before == 62:  # ">": a quoted line if the run of ">" starts a line
                k = i - 1
                while k and buf[k - 1] == 62:
                    k -= 1
                if not k or buf[k - 1] in (10, 0):
                    quoted += 1
            pos = i + 5

    def _content_length_end(self, body: int) -> int | None:
        """Where the mail at ``body`` ends by its Content-Length, if that lands on a separator or the end of the file."""
        while True:
            blank = _BLANK.search(self.buf, body, body + HEADER_LIMIT)
            if blank is not None or len(self.buf) - body > HEADER_LIMIT or not self._more():
                break
        if blank is None:
            return None
        head_end = blank.end()
        found = _LENGTH.search(self.buf, body, head_end)
        if found is None:
            return None
        end = head_end + int(found.group(1))
        if end - body > self.max_mail:
            return None
        while len(self.buf) < end + MAX_LINE and self._more():
            pass
        if end > len(self.buf):
            return None
        at = end
        for _ in range(2):  # the blank line before the next separator, LF or CRLF
            if self.buf.startswith(b"\n", at):
                at += 1
            elif self.buf.startswith(b"\r\n", at):
                at += 2
        if at >= len(self.buf) and self.eof:
            return end
        if self.buf.startswith(b"From ", at) and self._separator_at(at):
            return end
        return None

    def mails(self) -> Iterator[Mail]:
        """Every mail from the reader's offset on; the buffer holds at most about a chunk beyond the current mail."""
        while True:
            if self.off >= self.chunk:
                self._compact()
            while len(self.buf) - self.off < 6 and self._more():
                pass
            self.off = _LEAD.match(self.buf, self.off).end()  # type: ignore[union-attr]
            if self.off >= len(self.buf) and not self._more():
                return
            if not self.buf.startswith(b"From ", self.off):  # only after damage: pass to the next separator
                sep = self._next_separator(self.off)[0]
                self.off = len(self.buf) if sep < 0 else sep
                continue
            mail = self._one()
            mail.cr = self.cr
            yield mail

    def _one(self) -> Mail:
        """The mail at ``off`` (a separator), and ``off`` moved past it."""
        start = self.off
        nl = self._line_end(start)
        if nl < 0:  # a separator line alone at the end of the file
            self.off = len(self.buf)
            return Mail(self.base + start, self.base + self.off, self.buf[start + 5 :].rstrip(b"\r\n"), b"", last=True)
        envelope = self.buf[start + 5 : nl].rstrip(b"\r")
        body = nl + 1
        by_length = self._content_length_end(body) if self.variant in ("auto", "mboxcl", "mboxcl2") else None
        if by_length is not None:
            nxt = _LEAD.match(self.buf, by_length).end()  # type: ignore[union-attr]
            last = nxt >= len(self.buf) and not self._more()
            variant = "mboxcl2" if self.variant == "auto" else self.variant
            self.off = nxt
            return Mail(self.base + start, self.base + nxt, envelope, unquote(self.buf[body:by_length], variant), last=last)
        problems = []
        if self.variant in ("mboxcl", "mboxcl2"):
            problems.append("mbox: no Content-Length that ends at a separator; read up to the next separator")
        self.first_unquoted = -1
        sep, unquoted, quoted = self._next_separator(body)
        if sep == -2:
            return self._big(start, envelope, body)
        end = len(self.buf) if sep < 0 else sep
        raw = self.buf[body:end]
        nul = 0
        if raw.endswith(b"\0"):  # a NUL run before the separator (a crash's leftover); NULs inside a mail stay
            stripped = raw.rstrip(b"\0")
            nul, raw = len(raw) - len(stripped), stripped
            problems.append("mbox: NUL bytes after the mail were cut")
        raw = raw[: len(raw) - _blank_end(raw)]
        if unquoted:
            problems.append("mbox: a 'From ' line in the body was not quoted by its writer; kept in this mail")
        variant = "mboxrd" if self.variant == "auto" else self.variant
        self.off = end
        raw = unquote(raw, variant) if quoted else raw
        mail = Mail(self.base + start, self.base + end, envelope, raw, last=sep < 0, unquoted=unquoted, nul_bytes=nul,
                    unquoted_at=self.first_unquoted if unquoted else -1)  # fmt: skip
        mail.problems = problems
        return mail

    def _big(self, start: int, envelope: bytes, body: int) -> Mail:
        """A mail longer than MAX_MAIL: keep its beginning, pass the rest up to the next separator without holding it."""
        first = self.base + start
        kept = self.buf[body : body + KEEP_OF_BIG]
        while True:
            keep = len(self.buf) - 6  # keep a possible "\nFrom" cut by the chunk's end
            self.buf, self.base, self.off = self.buf[keep:], self.base + keep, 0
            sep = self._next_separator(0, limit=self.chunk)[0]
            if sep >= 0:
                self.off = sep
                return Mail(first, self.base + sep, envelope, kept, too_big=True)
            if sep == -1:
                self.off = len(self.buf)
                return Mail(first, self.base + self.off, envelope, kept, last=True, too_big=True)


def takeout_fields(raw: bytes) -> tuple[bytes, dict[str, object]]:
    """A Takeout mail without the ``X-GM-THRID`` and ``X-Gmail-Labels`` lines Takeout put first, and their values.

    Google Takeout adds those two header fields in front of each mail as Gmail holds it; taken off, the bytes are the
    mail a Gmail IMAP fetch gives (so a mail without a Message-ID has one hash either way). Fields elsewhere in the
    header are left where they are. Values, named as in the IMAP poller's ``extra.gmail`` (:mod:`pollers.email.imap.gmail`):
    ``thrid`` (str) and ``labels`` (list of str, Takeout's names: ``Inbox``, ``Opened``, ``Category Updates``; quoted
    labels may hold commas).
    """
    fields: dict[str, object] = {}
    pos = 0
    while True:
        line_end = raw.find(b"\n", pos)
        if line_end < 0:
            break
        low = raw[pos : pos + 16].lower()
        name = next((n for n in _TAKEOUT if low.startswith(n)), None)
        if name is None:
            break
        end = line_end + 1
        while raw[end : end + 1] in (b" ", b"\t"):  # folded onto the next line
            nxt = raw.find(b"\n", end)
            end = len(raw) if nxt < 0 else nxt + 1
        value = re.sub(rb"\r?\n[ \t]+", b" ", raw[pos + len(name) : end]).strip().decode("utf-8", "replace")
        if "=?" in value:  # a label outside ASCII, as an RFC 2047 encoded word
            from pollers.email.mail.headers import decode_words

            value = decode_words(value, [], "X-Gmail-Labels")
        if name == b"x-gm-thrid:":
            fields["thrid"] = value
        else:
            fields["labels"] = [label.strip() for label in next(csv.reader([value]), []) if label.strip()]
        pos = end
    return raw[pos:], fields


def takeout_msgid(envelope: bytes) -> str | None:
    """Gmail's message ID from a Takeout separator (``1773664405479613283@xxx Tue Aug ...``), or None."""
    sender = envelope.split(b" ", 1)[0]
    if sender.endswith(b"@xxx") and sender[:-4].isdigit():
        return sender[:-4].decode()
    return None
