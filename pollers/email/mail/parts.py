"""The parts of a mail: which become its text, which are listed as attachments; none silently dropped.

Every leaf part is accounted for: it is the text, appended to the text
(inline text parts after the first, behind a visible separator), an
unchosen alternative of a ``multipart/alternative`` (the HTML twin of the
plain text), or an attachment. An inline text part keeps its file name
(``Parts.text_files``); a mail that is one inline HTML part is text even
when it has a file name. An attached message (``message/rfc822``,
``message/global`` (RFC 6532, a whole mail in UTF-8), ``message/news``, a
bounce's ``message/delivery-status``, ...) is one attachment carrying its own
subject, sender and date; the readable text of an attached mail or news
article (rfc822, global, news) is appended to the text behind an
``attached message`` line, its own parts never become the outer attachments.
A ``message/external-body`` part holds no content (it names where the body
is: an FTP site, a URL, a mail server): it is no attachment; a one-line note
naming the reference (access type, name, site, directory, URL) is the text it
gives.
"""

from __future__ import annotations

import email.message
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from memex.plugin import Attachment
from pollers.email.mail.headers import addresses, clean, decode_bytes, decode_words, header_text, message_ids, parse_date, raw
from pollers.email.mail.searchable import PART_LIMIT, calendar_text, enriched_text, html_words, search_text

SEPARATOR = "\n\n-------------- next part --------------\n"
ATTACHED = "\n\n-------------- attached message --------------\n"
READABLE_MESSAGES = ("message/rfc822", "message/global", "message/news")  # a mail or article: its text is shown
REPORTS = ("message/delivery-status", "message/disposition-notification", "message/global-delivery-status")
SEARCHED_ANYWAY = ("text/calendar", "text/enriched", "text/richtext", "text/rfc822-headers")  # even as attachments
_EXTERNAL_PARAMS = ("access-type", "name", "site", "directory", "server", "url", "subject")
_BLOCK_TAGS = frozenset(
    ["p", "div", "br", "li", "ul", "ol", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "hr", "section", "article", "header", "footer", "title"]
)  # fmt: skip


class _HTMLText(HTMLParser):
    """Collects the visible text of an HTML document, a line per block."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Open a block (new line) or a skipped element (script, style, head)."""
        if tag in ("script", "style", "head"):
            self._skip += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        """Close a skipped element or a block."""
        if tag in ("script", "style", "head"):
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        """Keep visible text."""
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """The visible text of an HTML body: tags dropped, entities decoded, whitespace collapsed per line."""
    parser = _HTMLText()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # html.parser is lenient; this is a last resort
        return re.sub(r"<[^>]*>", " ", html)
    lines = (re.sub(r"[ \t\r\f\v\xa0]+", " ", line).strip() for line in "".join(parser.parts).split("\n"))
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


@dataclass
class Parts:
    """What a walk over a mail found: text segments ``(content type, text)``, attachments, and skipped alternatives."""

    segments: list[tuple[str, str]] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    text_files: list[str] = field(default_factory=list)  # file names of inline text parts that are in the text
    alternatives: int = 0  # leaf parts not used because a sibling alternative was chosen
    leaves: int = 0  # every leaf part seen (an attached message counts as one)
    searched: list[str] = field(default_factory=list)  # readable text of parts not in the text (:mod:`.searchable`)
    filenames: list[str] = field(default_factory=list)  # file names of the attachments inside (an attached message's)


def _shadow(part: email.message.Message) -> email.message.Message:
    """A copy of the part's MIME headers as clean ``str`` values, so parameter parsing never meets a Header object."""
    shadow = email.message.Message()
    for name in ("Content-Type", "Content-Disposition"):
        value = raw(part, name)
        if value is not None:
            shadow[name] = clean(value)
    return shadow


def _disposition(part: email.message.Message) -> str:
    value = raw(part, "Content-Disposition")
    return clean(value).split(";")[0].strip().lower() if value else ""


def _filename(part: email.message.Message, problems: list[str], label: str) -> str | None:
    try:
        name = _shadow(part).get_filename()
    except Exception:
        problems.append(f"{label}: unparseable filename")
        return None
    return decode_words(clean(name), problems, f"{label} filename") if name else None


def decode_text(part: email.message.Message, problems: list[str], label: str) -> str:
    """A text part's payload as text: its charset, a superset, UTF-8, else with replacement characters."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        payload = str(part.get_payload()).encode("utf-8", "surrogateescape")
    charset = _shadow(part).get_content_charset()
    text, problem = decode_bytes(payload, charset, last="replace")
    if problem:
        problems.append(f"{label}: {problem}")
    return text


def _attached_message(part: email.message.Message, index: int, problems: list[str]) -> Attachment:
    """An attached message (forward, digest entry, bounce report) as one attachment with its own headers."""
    label = f"part {index}"
    blocks = [p for p in part.get_payload() if isinstance(p, email.message.Message)] if part.is_multipart() else []
    info: dict[str, str | None] = {}
    size: int | None = None
    try:
        size = sum(len(block.as_bytes()) for block in blocks)
    except Exception:
        problems.append(f"{label}: attached message not measurable")
    inner = blocks[0] if blocks else None
    if inner is not None and part.get_content_type() in READABLE_MESSAGES:
        senders = addresses(inner, "From", problems)
        info = {
            "subject": header_text(inner, "Subject", problems),
            "from": senders[0][1] if senders else None,
            "date": parse_date(raw(inner, "Date"), problems),
        }
        mid = message_ids(raw(inner, "Message-ID"))
        if mid:
            info["message_id"] = mid[0]
    attachment = Attachment(id=f"part{index}", filename=_filename(part, problems, label), mime_type=part.get_content_type(), size=size)
    if info:
        attachment["message"] = info
    return attachment


def _attachment(part: email.message.Message, index: int, problems: list[str]) -> Attachment:
    payload = part.get_payload(decode=True)
    cid = raw(part, "Content-ID")
    ids = message_ids(clean(cid)) if cid else []
    return Attachment(
        id=ids[0] if ids else f"part{index}",
        filename=_filename(part, problems, f"part {index}"),
        mime_type=part.get_content_type(),
        size=len(payload) if isinstance(payload, bytes) else None,
    )


def _count_leaves(part: email.message.Message) -> int:
    if part.get_content_maintype() == "message" or not part.is_multipart():
        return 1
    payload = part.get_payload()
    return sum(_count_leaves(p) for p in payload if isinstance(p, email.message.Message)) if isinstance(payload, list) else 1


class _Walker:
    def __init__(self, problems: list[str], first: int = 0) -> None:
        self.problems = problems
        self.first = first  # the number of the part the walk starts at (the whole mail, or an attached one)
        self.index = first
        self.found = Parts()

    def walk(self, part: email.message.Message) -> list[tuple[str, str]]:
        """Walk ``part`` (numbered in :meth:`email.message.Message.walk` order); return its text segments."""
        index = self.index
        self.index += 1
        ctype = part.get_content_type()
        if ctype == "message/external-body":
            self.found.leaves += 1
            self.index += _walk_size(part) - 1
            return [("text/plain", _external_note(part))]
        if part.get_content_maintype() == "message" and part.is_multipart():
            self.found.leaves += 1
            attachment = _attached_message(part, index, self.problems)
            self.found.attachments.append(attachment)
            self.index += _walk_size(part) - 1
            if ctype in REPORTS:
                self.found.searched.append(_report_text(part))
            return self._attached_text(part, index, attachment)
        if part.is_multipart():
            children = [p for p in part.get_payload() if isinstance(p, email.message.Message)]
            results = [self.walk(child) for child in children]
            if ctype == "multipart/alternative" and len(children) > 1:
                chosen = _choose(results)
                for i, child in enumerate(children):
                    if i != chosen:
                        self.found.alternatives += _count_leaves(child)
                        self.found.searched += [_readable(c, t) for c, t in results[i]]
                return results[chosen] if chosen is not None else []
            return [segment for result in results for segment in result]
        self.found.leaves += 1
        label = f"part {index}"
        inline = _disposition(part) != "attachment"
        name = _filename(part, [], label) if inline and ctype in ("text/plain", "text/html") else None
        if inline and (ctype == "text/plain" or (ctype == "text/html" and (name is None or index == self.first))):
            if name is not None:
                self.found.text_files.append(name)
            return [(ctype, decode_text(part, self.problems, label))]
        attachment = _attachment(part, index, self.problems)
        self.found.attachments.append(attachment)
        if ctype in SEARCHED_ANYWAY or (part.get_content_maintype() == "text" and inline):
            self.found.searched.append(_readable(ctype, decode_text(part, [], label)))
        return []

    def _attached_text(self, part: email.message.Message, index: int, attachment: Attachment) -> list[tuple[str, str]]:
        """The readable text of an attached mail or article, as one segment (its own attachments stay inside it: their
        file names go to ``filenames`` of the attachment's ``message``, its parts' other text to the search text)."""
        payload = part.get_payload()
        inner = payload[0] if isinstance(payload, list) and payload else None
        if part.get_content_type() not in READABLE_MESSAGES or not isinstance(inner, email.message.Message):
            return []
        found = walk_parts(inner, [], first=index + 1)  # its problems are its own: not the outer mail's
        names = [n for a in found.attachments if (n := a.get("filename"))] + found.filenames
        if names:
            attachment.setdefault("message", {})["filenames"] = names
            self.found.filenames += names
        self.found.searched += found.searched
        text = _joined(found.segments)
        return [(part.get_content_type(), text)] if text is not None else []


def _readable(ctype: str, text: str) -> str:
    """A part's text as words to search: HTML's visible text, a calendar's human fields, enriched text's words."""
    if ctype == "text/html":
        return html_words(text)
    if ctype == "text/calendar":
        return calendar_text(text)
    if ctype in ("text/enriched", "text/richtext"):
        return enriched_text(text)
    return text[:PART_LIMIT]


def _report_text(part: email.message.Message) -> str:
    """A delivery or disposition report's fields (each block's ``Name: value`` lines): a bounce's reason, its
    recipient, its diagnostic code."""
    blocks = [p for p in part.get_payload() if isinstance(p, email.message.Message)] if part.is_multipart() else []
    lines = []
    for block in blocks:
        for name, value in block.raw_items():
            lines.append(f"{name}: {' '.join(clean(value).split())}")
    return "\n".join(lines)[:PART_LIMIT]


def _external_note(part: email.message.Message) -> str:
    """A ``message/external-body`` reference as one line: ``[external body: access-type=anon-ftp name=... site=...]``."""
    shadow = _shadow(part)
    params = [(k, shadow.get_param(k)) for k in _EXTERNAL_PARAMS]
    shown = " ".join(f"{k}={clean(v)}" for k, v in params if isinstance(v, str) and v)
    return f"[external body: {shown}]" if shown else "[external body]"


def _walk_size(part: email.message.Message) -> int:
    return sum(1 for _ in part.walk())


def _choose(results: list[list[tuple[str, str]]]) -> int | None:
    """The alternative to show: the first with plain text, else the first with any text."""
    for i, segments in enumerate(results):
        if any(ctype == "text/plain" for ctype, _ in segments):
            return i
    for i, segments in enumerate(results):
        if segments:
            return i
    return None


def walk_parts(msg: email.message.Message, problems: list[str], *, first: int = 0) -> Parts:
    """Every part of ``msg`` accounted for: text segments in order, attachments, unchosen alternatives.

    ``first`` numbers the parts of an attached message as the outer mail's walk does.
    """
    walker = _Walker(problems, first)
    walker.found.segments = walker.walk(msg)
    return walker.found


def _joined(segments: list[tuple[str, str]]) -> str | None:
    """The segments as one text: HTML as its visible text, later parts behind :data:`SEPARATOR`, an attached
    message's text behind the :data:`ATTACHED` line."""
    text: str | None = None
    for ctype, segment in segments:
        segment = html_to_text(segment) if ctype == "text/html" else segment
        if ctype in READABLE_MESSAGES:
            text = (text or "") + (ATTACHED if text is not None else ATTACHED.lstrip("\n")) + segment
        else:
            text = segment if text is None else text + SEPARATOR + segment
    return text


@dataclass
class Body:
    """What a mail's parts give its record (:func:`body_and_attachments`)."""

    text: str | None  # inline text parts joined by SEPARATOR, HTML as its visible text
    attachments: list[Attachment]
    text_from: str | None  # the first text part's type
    text_files: list[str]  # file names of the inline text parts
    search_text: str | None  # words of the other parts the text lacks (:func:`pollers.email.mail.searchable.search_text`)


def body_and_attachments(msg: email.message.Message, problems: list[str]) -> Body:
    """The mail's text, attachments, first text part's type, inline text parts' file names and search text."""
    found = walk_parts(msg, problems)
    text_from = found.segments[0][0] if found.segments else None
    text = _joined(found.segments)
    return Body(text, found.attachments, text_from, found.text_files, search_text(text, found.searched))
