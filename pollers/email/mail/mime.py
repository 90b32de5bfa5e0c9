"""Raw mail to a compat32 message tree: the tree Python's ``email.feedparser`` builds, in one pass over the text.

The standard parser is incremental: it splits the mail into lines and hands each body line through a generator
and a stack of boundary checks, which is most of the CPU a poll spends on a mail (issue 25). :func:`parse_bytes`
runs the same algorithm (``email/feedparser.py`` of Python 3.11, step for step: the same header rules, defects,
preamble, epilogue and line-end trimming) over the whole text at once: a part's body is one slice of the text, cut
at the next line that closes it, found with ``str.find`` instead of a look at every line. What it does not take,
it leaves to the standard parser, which then builds the tree: a bare CR where a line it reads would end (the
standard parser ends lines there too; this one after LF only: in a header, a boundary-like line, or before ``--``),
a ``message/delivery-status`` part (blocks of headers split by blank lines), and any mail on which it fails. ``tests/email/test_mime.py`` pins that both
build the same tree, part by part, for every test mail and for damaged variants of them.

:class:`Mail` is the message class of every part: compat32's ``Message`` with a multipart boundary unfolded, a
content type read as its first token, and a part's decoded bytes, content type and headers by name remembered.
"""

from __future__ import annotations

import email
import email.errors as errors
import email.message
import re
from email.policy import compat32
from typing import Any

__all__ = ["Mail", "parse_bytes"]

_NLCRE = re.compile(r"\r\n|\r|\n")
_NLCRE_BOL = re.compile(r"(\r\n|\r|\n)")
_HEADER = re.compile(r"^(From |[\041-\071\073-\176]*:|[\t ])")  # a header line, a continuation, or a unix From
_LOOSE_BOUNDARY = re.compile(r'\sboundary\s*=\s*("([^"]*)"|([^\s;"]+))', re.IGNORECASE)


class Mail(email.message.Message):
    """A compat32 message whose multipart boundary is unfolded (``boundary="foo<CRLF> bar"`` is ``foo bar``).

    compat32 keeps the line break in the parameter, so the parser never meets the boundary and the whole
    multipart becomes one opaque part; RFC 5322 unfolding removes the line break only.
    """

    _decoded: tuple[Any, Any, Any] | None = None  # (payload, Content-Transfer-Encoding, its decoded bytes)
    _ctype: tuple[Any, int, str, str] | None = None  # (header list, its length, default type, content type)
    _index: tuple[Any, int, dict[str, list[str]]] | None = None  # (header list, its length, values by lower-case name)

    def get_boundary(self, failobj: Any = None) -> Any:
        """The boundary parameter, unfolded; also found after a missing ``;`` (``multipart/mixed<CRLF> boundary="b"``)."""
        boundary = super().get_boundary(None)
        if boundary is None and self.get_content_maintype() == "multipart":
            found = _LOOSE_BOUNDARY.search(str(self.get("content-type", "")))
            boundary = (found.group(2) if found.group(2) is not None else found.group(3)) if found else None
        if boundary is None:
            return failobj
        return re.sub(r"\r?\n(?=[ \t])", "", boundary) if isinstance(boundary, str) else boundary

    def get_payload(self, i: Any = None, decode: bool = False) -> Any:
        """As compat32's; a single part's decoded bytes are decoded once (the text, the attachment's size and the
        fingerprint each ask), and again only if the payload or its Content-Transfer-Encoding changed."""
        if not decode or i is not None or self.is_multipart():
            return super().get_payload(i, decode)  # type: ignore[call-overload]
        payload, cte = vars(self).get("_payload"), self.get("content-transfer-encoding")
        memo = self._decoded
        if memo is not None and memo[0] is payload and memo[1] == cte:
            return memo[2]
        value = super().get_payload(None, True)
        self._decoded = (payload, cte, value)
        return value

    def get_content_type(self) -> str:
        """The type's first token: ``image/png<CRLF> name=a.png`` (a missing ``;``) is ``image/png``, never the line break.

        Without it compat32 returns the whole folded value as the type, and the record's ``mime_type`` carried a
        line break and the parameters. Remembered until the headers or the default type change (a rendering asks
        a part's type a dozen times; each asking scans the headers).
        """
        headers, default = vars(self)["_headers"], self.get_default_type()
        memo = self._ctype
        if memo is not None and memo[0] is headers and memo[1] == len(headers) and memo[2] == default:
            return memo[3]
        ctype: str = super().get_content_type()
        token = ctype.split(None, 1)[0] if ctype.strip() else ctype
        value = token if token.count("/") == 1 else "text/plain"
        self._ctype = (headers, len(headers), default, value)
        return value

    def header_values(self, lname: str) -> list[str]:
        """Every value of the header named ``lname`` (lower case) as sent, in order: ``raw_items()`` filtered by name.

        The headers are indexed by name once, until they change (a rendering reads a dozen headers of a part).
        """
        return list(self._by_name().get(lname, ()))

    def header_value(self, lname: str) -> str | None:
        """The first value of the header named ``lname`` (lower case) as sent, or None (:meth:`header_values`' first)."""
        values = self._by_name().get(lname)
        return values[0] if values else None

    def _by_name(self) -> dict[str, list[str]]:
        headers = vars(self)["_headers"]
        memo = self._index
        if memo is None or memo[0] is not headers or memo[1] != len(headers):
            index: dict[str, list[str]] = {}
            for k, v in headers:
                index.setdefault(k.lower(), []).append(str(v))
            memo = self._index = (headers, len(headers), index)
        return memo[2]

    def replace_header(self, _name: str, _value: Any) -> None:
        """As compat32's (a header changed in place, the list as long as before: what is remembered is dropped)."""
        self._ctype = self._index = None
        super().replace_header(_name, _value)

    def __delitem__(self, name: str) -> None:
        """As compat32's (what is remembered is dropped)."""
        self._ctype = self._index = None
        super().__delitem__(name)


class _Fallback(Exception):
    """A shape this parser leaves to the standard one."""


_Match = Any  # a compiled boundary pattern's bound ``match``


class _Parser:
    """``email.feedparser.FeedParser._parsegen`` over the whole text: a read position and a stack of pushed-back lines
    stand for its ``BufferedSubFile``; a boundary check runs only on lines that start with ``--``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.pos = 0  # the next line's start in ``text``
        self.pending: list[str] = []  # lines pushed back, the next one last
        self.stack: list[_Match] = []  # the boundary checks of the enclosing multiparts (false end of input)
        self.msgstack: list[Mail] = []
        self.cur: Mail | None = None
        self.last: Mail | None = None

    # -- the input: BufferedSubFile ---------------------------------------------------------------------------------

    def readline(self) -> str:
        """The next line, or '' at the end of the input or at a line that closes an enclosing part (left unread)."""
        if self.pending:
            line = self.pending.pop()
        else:
            pos = self.pos
            if pos >= self.n:
                return ""
            end = self.text.find("\n", pos) + 1 or self.n
            line = self.text[pos:end]
            self.pos = end
            _no_bare_cr(line)
        for ateof in reversed(self.stack):
            if ateof(line):
                self.pending.append(line)
                return ""
        return line

    def unreadline(self, line: str) -> None:
        """Push a line back (it is read next)."""
        self.pending.append(line)

    def stop(self, checks: list[_Match]) -> int:
        """The start of the first line from the read position that one of ``checks`` matches, else the end.

        Only a line that starts with ``--`` can match, and lines start after LF here; a bare CR followed by ``--``
        (where the standard parser starts a line) is declined.
        """
        if not checks:
            return self.n
        text, start = self.text, self.pos
        pos = start
        while True:
            if not text.startswith("--", pos):
                found = text.find("\n--", pos)
                if found < 0:
                    pos = self.n
                    break
                pos = found + 1
            end = text.find("\n", pos) + 1 or self.n
            line = text[pos:end]
            _no_bare_cr(line)
            if any(check(line) for check in checks):
                break
            pos = end
        if text.find("\r--", start, pos) >= 0:
            raise _Fallback("a bare CR before --")
        return pos

    def rest(self) -> str:
        """Every line up to the end of the input or the next line that closes an enclosing part, joined."""
        chunks: list[str] = []
        while self.pending:
            line = self.readline()
            if line == "":
                return "".join(chunks)
            chunks.append(line)
        stop = self.stop(self.stack)
        chunks.append(self.text[self.pos : stop])
        self.pos = stop
        return "".join(chunks)

    # -- the message stack ----------------------------------------------------------------------------------------

    def new_message(self) -> Mail:
        msg = Mail(policy=compat32)
        if self.cur and self.cur.get_content_type() == "multipart/digest":
            msg.set_default_type("message/rfc822")
        if self.msgstack:
            self.msgstack[-1].attach(msg)
        self.msgstack.append(msg)
        self.cur = msg
        self.last = msg
        return msg

    def pop_message(self) -> Mail:
        msg = self.msgstack.pop()
        self.cur = self.msgstack[-1] if self.msgstack else None
        return msg

    # -- the grammar: FeedParser._parsegen ------------------------------------------------------------------------

    def parse(self) -> Mail:
        """The whole text as the root message (``FeedParser.close``)."""
        self.parsegen()
        root = self.pop_message()
        if self.msgstack:
            raise _Fallback("unbalanced")
        if root.get_content_maintype() == "multipart" and not root.is_multipart():
            compat32.handle_defect(root, errors.MultipartInvariantViolationDefect())
        return root

    def parsegen(self) -> None:
        """One message or part from the read position: its headers, then its body by its content type."""
        cur = self.new_message()
        headers: list[str] = []
        while True:
            line = self.readline()
            if line == "":
                break
            if not _HEADER.match(line):
                if not _NLCRE.match(line):
                    compat32.handle_defect(cur, errors.MissingHeaderBodySeparatorDefect())
                    self.unreadline(line)
                break
            headers.append(line)
        self.parse_headers(cur, headers)
        if cur.get_content_type() == "message/delivery-status":
            raise _Fallback("message/delivery-status")
        maintype = cur.get_content_maintype()
        if maintype == "message":
            self.parsegen()
            self.pop_message()
            return
        if maintype == "multipart":
            self.multipart(cur)
            return
        cur.set_payload(self.rest())

    def multipart(self, cur: Mail) -> None:
        """A multipart's preamble, parts and epilogue, with the standard parser's defects and line-end trimming."""
        boundary = cur.get_boundary()
        if boundary is None:
            compat32.handle_defect(cur, errors.NoBoundaryInMultipartDefect())
            cur.set_payload(self.rest())
            return
        if str(cur.get("content-transfer-encoding", "8bit")).lower() not in ("7bit", "8bit", "binary"):
            compat32.handle_defect(cur, errors.InvalidMultipartContentTransferEncodingDefect())
        separator = "--" + boundary
        match = re.compile("(?P<sep>" + re.escape(separator) + r")(?P<end>--)?(?P<ws>[ \t]*)(?P<linesep>\r\n|\r|\n)?$").match
        capturing_preamble = True
        preamble: list[str] = []
        linesep: Any = False
        close_boundary_seen = False
        while True:
            if capturing_preamble and not self.pending:  # the preamble's lines at once, up to a boundary
                stop = self.stop([*self.stack, match])
                if stop > self.pos:
                    preamble.append(self.text[self.pos : stop])
                    self.pos = stop
            line = self.readline()
            if line == "":
                break
            mo = match(line)
            if mo:
                if mo.group("end"):
                    close_boundary_seen = True
                    linesep = mo.group("linesep")
                    break
                if capturing_preamble:
                    if preamble:
                        preamble[-1] = _cut_eol(preamble[-1])
                        cur.preamble = "".join(preamble)
                    capturing_preamble = False
                    self.unreadline(line)
                    continue
                while True:  # boundary lines in a row make no empty parts
                    line = self.readline()
                    if not match(line):
                        self.unreadline(line)
                        break
                self.stack.append(match)
                self.parsegen()
                self.trim_last()
                self.stack.pop()
                self.pop_message()
                self.last = self.cur
            else:
                if not capturing_preamble:
                    raise _Fallback("a line after a part that closes nothing")
                preamble.append(line)
        if capturing_preamble:
            compat32.handle_defect(cur, errors.StartBoundaryNotFoundDefect())
            cur.set_payload("".join(preamble))
            self.rest()
            cur.epilogue = ""
            return
        if not close_boundary_seen:
            compat32.handle_defect(cur, errors.CloseBoundaryNotFoundDefect())
            return
        epilogue = self.rest()
        if not linesep:
            bol = _NLCRE_BOL.match(epilogue)
            if bol:
                epilogue = epilogue[len(bol.group(0)) :]
        cur.epilogue = epilogue

    def trim_last(self) -> None:
        """The line end before a boundary belongs to the boundary: cut it from the last part read (RFC 2046)."""
        last = self.last
        if last is None:
            raise _Fallback("no part")
        if last.get_content_maintype() == "multipart":
            epilogue = last.epilogue
            if epilogue == "":
                last.epilogue = None
            elif epilogue is not None:
                last.epilogue = _cut_eol(epilogue)
        else:
            payload = vars(last).get("_payload")
            if isinstance(payload, str):
                vars(last)["_payload"] = _cut_eol(payload)

    def parse_headers(self, cur: Mail, lines: list[str]) -> None:
        """``FeedParser._parse_headers``: continuations joined, a leading unix From kept, misplaced lines as defects."""
        lastheader = ""
        lastvalue: list[str] = []
        for lineno, line in enumerate(lines):
            if line[0] in " \t":
                if not lastheader:
                    compat32.handle_defect(cur, errors.FirstHeaderLineIsContinuationDefect(line))
                    continue
                lastvalue.append(line)
                continue
            if lastheader:
                cur.set_raw(*compat32.header_source_parse(lastvalue))
                lastheader, lastvalue = "", []
            if line.startswith("From "):
                if lineno == 0:
                    cur.set_unixfrom(_cut_eol(line))
                    continue
                if lineno == len(lines) - 1:
                    self.unreadline(line)
                    return
                cur.defects.append(errors.MisplacedEnvelopeHeaderDefect(line))
                continue
            i = line.find(":")
            if i == 0:
                cur.defects.append(errors.InvalidHeaderDefect("Missing header name."))
                continue
            if i < 0:
                raise _Fallback("a header line without a colon")
            lastheader = line[:i]
            lastvalue = [line]
        if lastheader:
            cur.set_raw(*compat32.header_source_parse(lastvalue))


def _no_bare_cr(line: str) -> None:
    """Decline a line (read up to its LF) holding a CR not followed by LF: the standard parser ends a line there."""
    if "\r" in line and line.count("\r") != (1 if line.endswith("\r\n") else 0):
        raise _Fallback("a bare CR")


def _cut_eol(text: str) -> str:
    """``text`` less one trailing line end (CRLF, CR or LF), as the standard parser's ``NLCRE_eol`` cuts it."""
    if text.endswith("\r\n"):
        return text[:-2]
    if text.endswith(("\r", "\n")):
        return text[:-1]
    return text


def parse_bytes(raw: bytes) -> Mail:
    """``email.message_from_bytes(raw, _class=Mail)``: the same tree, built in one pass where the shape allows."""
    try:
        return _Parser(raw.decode("ascii", "surrogateescape")).parse()
    except Exception:
        pass
    return email.message_from_bytes(raw, _class=Mail)
