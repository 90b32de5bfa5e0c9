"""How the web view shows the read model's answers: safe text, highlighted snippets, days, sizes, files and a chart.

Every piece of text from a message or a source reaches a page through :func:`shown` (or :func:`shown_body`): its
controls made visible as the CLI shows them (:mod:`memex.observe.safe_text`: ``\\x1b[2J``, ``\\u202e``), then
HTML-escaped by Jinja2's autoescaping. Nothing here returns markup built from message text except through
:func:`markupsafe.escape`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import Any
from urllib.parse import quote

from markupsafe import Markup, escape

from memex.observe.safe_text import visible

# Attachment types a browser shows inline with no chance of running anything (with nosniff and a sandboxing CSP);
# every other type (HTML, SVG, XML, PDF, ...) is served as a download.
INLINE_IMAGE = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp"})
INLINE_AUDIO = frozenset({"audio/mpeg", "audio/ogg", "audio/wav", "audio/x-wav", "audio/mp4", "audio/aac", "audio/webm", "audio/flac"})
INLINE_VIDEO = frozenset({"video/mp4", "video/webm", "video/ogg", "video/quicktime"})
SOURCE_COLOURS = ("#3b6fd6", "#d65a3b", "#2f9e62", "#9a4fd1", "#c9951d", "#1d9bb0", "#b03a78", "#6b7a1d")


def shown(value: Any) -> str:
    """One line of message or source text with its controls visible (escaped by the template)."""
    return "" if value is None else visible(value)


def shown_body(value: Any) -> str:
    """A message body with its controls visible, newlines kept (the page shows it ``white-space: pre-wrap``)."""
    return "" if value is None else visible(value, multiline=True)


def highlighted(text: str, spans: Sequence[tuple[int, int]]) -> Markup:
    """A snippet with its matched words in ``<mark>``: each piece made visible and escaped on its own."""
    out, at = [], 0
    for start, end in sorted(spans):
        if start < at or end <= start:
            continue
        out.append(escape(visible(text[at:start])))
        out.append(Markup("<mark>") + escape(visible(text[start:end])) + Markup("</mark>"))
        at = end
    out.append(escape(visible(text[at:])))
    return Markup("").join(out)


def anchor(key: str) -> str:
    """The HTML id of a message on a page (``m-`` and 12 hex digits of its key's hash: any key, a valid id)."""
    return "m-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def url_part(value: Any) -> str:
    """``value`` as one path segment of a URL (``/`` included: keys are passed whole)."""
    return quote(str(value), safe="")


def when(value: datetime | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """A UTC time as the pages show it ("" when the source gave none)."""
    return value.strftime(fmt) if value is not None else ""


def size(n: int | None) -> str:
    """A byte count for people: ``812 B``, ``14.2 KB``, ``3.1 MB``."""
    if n is None:
        return "size unknown"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"


def attachment_kind(mime: str | None, name: str | None = None) -> str:
    """How a page shows an attachment: ``image``, ``audio``, ``video`` (in the browser's own element) or ``file``."""
    kind = (mime or "").split(";")[0].strip().lower()
    if kind in INLINE_IMAGE:
        return "image"
    if kind in INLINE_AUDIO:
        return "audio"
    if kind in INLINE_VIDEO:
        return "video"
    return "file"


_NAME_UNSAFE = re.compile(r'[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"\\/:;*?<>|]')


def content_disposition(name: str | None, *, inline: bool) -> str:
    """A ``Content-Disposition`` value for an attachment named ``name``: controls, bidi overrides, quotes, slashes and
    separators replaced by ``_``; an ASCII ``filename`` and the exact UTF-8 ``filename*`` (RFC 6266)."""
    clean = _NAME_UNSAFE.sub("_", name or "").strip(" .") or "attachment"
    clean = clean[:200]
    ascii_name = clean.encode("ascii", "replace").decode("ascii").replace("?", "_")
    return f"{'inline' if inline else 'attachment'}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(clean, safe='')}"


def days(messages: Iterable[Any]) -> list[tuple[str, list[Any]]]:
    """Messages grouped under day separators (``Monday 3 March 2025``), in their order; undated ones under "no date"."""
    groups: list[tuple[str, list[Any]]] = []
    for m in messages:
        label = m.sent.strftime("%A %-d %B %Y") if m.sent is not None else "no date"
        if not groups or groups[-1][0] != label:
            groups.append((label, []))
        groups[-1][1].append(m)
    return groups


def colour(source: str, sources: Sequence[str]) -> str:
    """The chart colour of ``source`` (by its place among ``sources``)."""
    index = list(sources).index(source) if source in sources else len(sources)
    return SOURCE_COLOURS[index % len(SOURCE_COLOURS)]


def month_chart(per_source: dict[str, dict[str, int]], *, width: int = 640, height: int = 160) -> Markup:
    """Messages per month per source as an inline SVG of stacked bars, drawn on the server (no script, no library).

    ``per_source``: source -> {"YYYY-MM": n}. Months without messages between the first and the last are drawn
    empty; each bar has a ``<title>`` (its month and counts); the figure has a text alternative.
    """
    months = sorted({m for counts in per_source.values() for m in counts})
    if not months:
        return Markup('<p class="muted">No messages to chart.</p>')
    months = _month_range(months[0], months[-1])
    sources = sorted(per_source)
    totals = [sum(per_source[s].get(m, 0) for s in sources) for m in months]
    top = max(totals) or 1
    bar = min(width / len(months), 48.0)
    width = max(int(bar * len(months)), 120)
    label = f"Messages per month per source, {months[0]} to {months[-1]}, at most {top} in a month"
    parts = [
        f'<svg class="chart" width="{width}" height="{height + 20}" viewBox="0 0 {width} {height + 20}" role="img" aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, month in enumerate(months):
        y = float(height)
        tip = ", ".join(f"{s}: {per_source[s].get(month, 0)}" for s in sources if per_source[s].get(month))
        parts.append(f"<g><title>{escape(month)}: {escape(tip) if tip else 'none'}</title>")
        for s in sources:
            n = per_source[s].get(month, 0)
            if n:
                h = n / top * height
                y -= h
                parts.append(
                    f'<rect x="{i * bar:.1f}" y="{y:.1f}" width="{max(bar - 1, 0.5):.1f}" height="{h:.1f}" fill="{colour(s, sources)}"/>'
                )
        parts.append("</g>")
    for i, month in enumerate(months):
        if month.endswith("-01") or i == 0 or len(months) <= 8:
            parts.append(f'<text x="{i * bar:.1f}" y="{height + 15}" class="axis">{escape(month)}</text>')
    parts.append("</svg>")
    legend = "".join(
        f'<li><svg class="swatch" viewBox="0 0 10 10" aria-hidden="true"><rect width="10" height="10" fill="{colour(s, sources)}"/></svg>'
        f"{escape(visible(s))}</li>"
        for s in sources
    )
    return Markup("".join(parts) + f'<ul class="legend">{legend}</ul>')


def _month_range(first: str, last: str) -> list[str]:
    year, month = int(first[:4]), int(first[5:7])
    out: list[str] = []
    while f"{year:04d}-{month:02d}" <= last and len(out) < 1200:
        out.append(f"{year:04d}-{month:02d}")
        month += 1
        if month > 12:
            year, month = year + 1, 1
    return out


def parse_day(text: str | None, default: date) -> date:
    """A ``YYYY-MM-DD`` query parameter as a date; ``default`` when absent or unreadable."""
    try:
        return date.fromisoformat(text) if text else default
    except ValueError:
        return default
