"""The words of a mail's parts that are not its text, kept for search only (``extra.search_text``).

A mail's ``text`` is what a person reads: the plain alternative, the inline text parts. notmuch indexes more: the
HTML alternative too, and every text part. So the renderer keeps, for search, the readable text of the parts that are
not in ``text``: the unchosen alternative (HTML's visible text), a calendar invitation (its SUMMARY, LOCATION,
DESCRIPTION and COMMENT, unfolded and unescaped), enriched text (its formatting commands dropped), a bounce's
``message/delivery-status`` and ``text/rfc822-headers`` (their fields as ``Name: value`` lines), any other inline
text part. :func:`search_text` keeps only the lines whose words the text does not already hold in that order, so an
HTML twin of the plain text (the usual case) adds nothing to the record; the rest is capped at :data:`LIMIT`
characters.

Why in the record rather than only in the index: the index is rebuilt from the stored records alone (never the
``.eml`` blobs), and a record read by another tool (DuckDB over the bucket) should be searchable the same way.
"""

from __future__ import annotations

import html
import re

LIMIT = 64 * 1024  # characters of search text a mail keeps at most
PART_LIMIT = 256 * 1024  # characters of one part read for it (a huge calendar or log attachment is cut)
CALENDAR_FIELDS = ("SUMMARY", "LOCATION", "DESCRIPTION", "COMMENT")
_ENRICHED_COMMAND = re.compile(r"<(/?[A-Za-z0-9-]+)>")
_HIDDEN = re.compile(r"<(script|style|head)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_BLOCK = re.compile(r"</?(?:br|p|div|li|tr|td|th|h[1-6]|blockquote|pre|hr|table|ul|ol|title|section|article)\b[^>]*>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
_WORDS = re.compile(r"\w+")


def html_words(markup: str) -> str:
    """An HTML part's visible words, a line per block, for search: tags, scripts, styles and comments dropped,
    entities decoded. Regular expressions, not an HTML parser: a tenth of the time, and a word is a word wherever the
    line breaks fall (the text shown, ``pollers.email.mail.parts.html_to_text``, keeps its careful parser)."""
    markup = _HIDDEN.sub(" ", markup[:PART_LIMIT])
    return html.unescape(_TAG.sub("", _BLOCK.sub("\n", markup)))


def calendar_text(ics: str) -> str:
    """An iCalendar object's human fields (:data:`CALENDAR_FIELDS`), one per line, unfolded and unescaped."""
    unfolded = re.sub(r"\r?\n[ \t]", "", ics[:PART_LIMIT])
    out = []
    for line in unfolded.splitlines():
        name, sep, value = line.partition(":")
        if not sep or name.split(";", 1)[0].strip().upper() not in CALENDAR_FIELDS:
            continue
        value = re.sub(r"\\([nN])", "\n", value)
        value = re.sub(r"\\([,;\\])", r"\1", value)
        if value.strip():
            out.append(value.strip())
    return "\n".join(out)


def enriched_text(text: str) -> str:
    """text/enriched (RFC 1896) as plain text: formatting commands dropped, ``<<`` is ``<``, a lone line end a space."""
    text = text[:PART_LIMIT].replace("\r\n", "\n")
    text = re.sub(r"<param>.*?</param>", "", text, flags=re.IGNORECASE | re.DOTALL)
    text = _ENRICHED_COMMAND.sub("", text).replace("<<", "<")
    return re.sub(r"(?<!\n)\n(?!\n)", " ", text)


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def search_text(text: str | None, extras: list[str]) -> str | None:
    """The lines of ``extras`` whose words ``text`` lacks (compared case-folded, whitespace made one space), each kept
    once, joined by line ends and capped at :data:`LIMIT` characters; None when that leaves nothing. When every word
    of ``extras`` is a word of ``text`` (an HTML twin of the plain text: most mail), nothing is compared line by line;
    a part whose words are exactly the text's, as written, is a twin before anything is case-folded or joined."""
    if not any(extras):
        return None
    words = (text or "").split()
    tokens = [extra.split() for extra in extras]
    if all(t == words for t in tokens if t):  # each an exact twin (most mail): no case folding, no joined copies
        return None
    have = " ".join(words).casefold()
    extras = [extra for extra, t in zip(extras, tokens, strict=True) if t and " ".join(t).casefold() not in have]
    if extras:
        known = set(_WORDS.findall(have))
        extras = [extra for extra in extras if not set(_WORDS.findall(extra.casefold())) <= known]
    if not extras:
        return None
    seen: set[str] = set()
    kept: list[str] = []
    size = 0
    for extra in extras:
        for line in extra.splitlines():
            flat = _flat(line)
            if not flat or flat in seen or flat in have:
                continue
            seen.add(flat)
            line = " ".join(line.split())
            if size + len(line) > LIMIT:
                kept.append(line[: max(0, LIMIT - size)])
                return "\n".join(kept).strip() or None
            kept.append(line)
            size += len(line) + 1
    return "\n".join(kept) or None
