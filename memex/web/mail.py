"""A mail's HTML made harmless for the web view: taken from the stored mail, sanitised with nh3, framed without script.

The record holds a mail's text (the HTML part rendered to text by the poller); the mail as received is stored
beside it (``messages/<source>/<id>.eml``). The web view shows the HTML part of that mail, cleaned by `nh3`_ (the
Python binding of the Rust crate ammonia, a maintained allow-list sanitiser): no ``<script>``, ``<style>``,
``<iframe>``, ``<form>``, event handler or ``javascript:``/``data:`` link survives; links open in a new tab without
a referrer. The cleaned HTML is served on its own URL under :data:`memex.web.security.MAIL_CSP` and shown in an
``<iframe sandbox>`` without ``allow-scripts`` or ``allow-same-origin``: even a sanitiser bug could not run script or
read the archive. Remote images, styles and fonts (a tracking pixel) stay blocked by that CSP until the user opens
"load remote content" for that message.

.. _nh3: https://nh3.readthedocs.io/
"""

from __future__ import annotations

import re
from typing import Any

# Tags and attributes a mail may keep: text, tables, images, links and their presentation; nothing active.
TAGS = frozenset(
    {"a", "abbr", "address", "b", "bdi", "big", "blockquote", "br", "caption", "center", "cite", "code", "col", "colgroup",
     "dd", "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "font", "h1", "h2", "h3", "h4",
     "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span",
     "strike", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "tt", "u", "ul", "wbr"}
)  # fmt: skip
ATTRIBUTES = {
    "*": {"align", "bgcolor", "class", "color", "dir", "height", "lang", "style", "title", "valign", "width"},
    "a": {"href", "name"},
    "img": {"alt", "src", "border"},
    "font": {"face", "size"},
    "table": {"border", "cellpadding", "cellspacing"},
    "td": {"colspan", "rowspan", "nowrap"},
    "th": {"colspan", "rowspan", "nowrap", "scope"},
    "ol": {"start", "type"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto", "cid"})
_CID = re.compile(r"""(src\s*=\s*["'])cid:([^"']+)(["'])""", re.IGNORECASE)


def html_part(raw: bytes) -> str | None:
    """The HTML body of a stored mail (the ``text/html`` part a reader would show), or None when it has none."""
    import email
    import email.policy

    try:
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        part: Any = msg.get_body(preferencelist=("html",))
        if part is None:
            return None
        content = part.get_content()
    except Exception:  # a broken mail: the record's text is shown instead
        return None
    return content if isinstance(content, str) and content.strip() else None


_REMOTE_URL = re.compile(r"url\s*\([^)]*\)", re.IGNORECASE)


def _local_only(tag: str, attribute: str, value: str) -> str | None:
    """nh3's attribute filter without remote content: no remote image source, no ``url(...)`` in a style, so the
    browser is never asked for them (a tracking pixel is not even requested, let alone loaded)."""
    if attribute == "src":
        return value if value.lower().startswith("cid:") else None
    if attribute == "style":
        return _REMOTE_URL.sub("none", value)
    return value


def sanitise(html: str, cid_urls: dict[str, str] | None = None, *, remote: bool = False) -> str:
    """``html`` cleaned by nh3 with memex's allow-list; ``cid:`` images pointed at this server's attachment URLs.

    Without ``remote``, remote image sources and style URLs are removed (the user has not asked for them). Its
    text keeps no terminal control or bidi override raw: they are shown as the CLI shows them (``\\u202e``).
    """
    import nh3

    from memex.observe.safe_text import visible

    cleaned = nh3.clean(
        html,
        tags=set(TAGS),
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
        set_tag_attribute_values={"a": {"target": "_blank"}},
        attribute_filter=None if remote else _local_only,
    )
    cleaned = visible(cleaned, multiline=True)
    urls = cid_urls or {}

    def point(match: re.Match[str]) -> str:
        url = urls.get(match.group(2).strip("<>"))
        return f"{match.group(1)}{url}{match.group(3)}" if url else f"{match.group(1)}{match.group(3)}"

    return _CID.sub(point, cleaned)


def document(body: str) -> str:
    """The page the mail frame loads: the cleaned body in a minimal HTML document (no external anything)."""
    return (
        '<!doctype html><html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
        "<style>body{font:15px/1.45 system-ui,sans-serif;margin:8px;color:#111;background:#fff;overflow-wrap:anywhere}"
        "img{max-width:100%;height:auto}</style></head><body>" + body + "</body></html>"
    )
