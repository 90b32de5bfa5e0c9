"""A snippet's matched words as offsets: SQLite's ``snippet()`` marks them with :data:`memex.search.query.HIGHLIGHT`;
the read model hands out the text without the marks and the ``(start, end)`` of each marked piece."""

from __future__ import annotations

from memex.read.models import Snippet

START, END = "\x02", "\x03"  # memex.search.query.HIGHLIGHT (not imported: a snippet needs no query compiler)


def highlighted(raw: str) -> Snippet:
    """``raw`` (a snippet with marks) as plain text, its whitespace folded to single spaces, and the marked spans."""
    text: list[str] = []
    spans: list[tuple[int, int]] = []
    at, start = 0, None
    for piece in _pieces(" ".join(raw.split())):
        if piece == START:
            start = at
        elif piece == END:
            if start is not None and at > start:
                spans.append((start, at))
            start = None
        else:
            text.append(piece)
            at += len(piece)
    return Snippet(text="".join(text), highlights=tuple(spans))


def _pieces(raw: str) -> list[str]:
    """``raw`` cut at each mark, the marks kept as pieces of their own."""
    out: list[str] = []
    buf = ""
    for ch in raw:
        if ch in (START, END):
            if buf:
                out.append(buf)
            out.append(ch)
            buf = ""
        else:
            buf += ch
    if buf:
        out.append(buf)
    return out
