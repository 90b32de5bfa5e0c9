"""The web view's pages: each a GET of a plain URL, rendered on the server from the read model's answers.

Every handler only reads (:mod:`memex.read`); a bad parameter is a page saying so (400), an unknown key a 404, a
query memex cannot read the parser's line (400), an archive that cannot answer (no index yet) its one line (503).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from memex.web import present
from memex.web.mail import document, html_part, sanitise
from memex.web.security import MAIL_CSP, MAIL_CSP_REMOTE

PAGE = 50  # messages or conversations on a page
TIMELINE = 500  # messages of a timeline page at most (each is read from the store); a busier day says so
MAX_QUERY = 2000  # characters of a search a page reads
TOTAL_CAP = 1000  # matches a search page counts: beyond, "1000+ messages" (an exact count of a common word is most of its time)
# An attachment opened on its own: a download runs nothing (``sandbox``: no script, an opaque origin). An image, audio
# or video of the short list (nosniff: never read as anything else) is shown by the browser's own viewer, which loads
# it again from this origin (so no sandbox: an opaque origin is refused by Cross-Origin-Resource-Policy) and may
# style itself inline; nothing else.
ATTACHMENT_CSP = "default-src 'none'; object-src 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox"
ATTACHMENT_CSP_INLINE = (
    "default-src 'none'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'; object-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)


class BadRequest(Exception):
    """A parameter a page cannot use (400, with this line)."""


class NotFound(Exception):
    """Nothing at this key (404, with this line)."""


class Views:
    """The pages of one archive: handlers Starlette calls, each rendering a template with the read model's answers."""

    def __init__(self, archive: Any, env: Any, sources: list[str]) -> None:
        self.archive = archive
        self.env = env
        self.configured = sources
        self._known: list[str] | None = None

    def page(self, name: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        """``name`` rendered with ``context`` (and what every page needs) as an HTML response."""
        html = self.env.get_template(name).render(request=request, path=request.url.path, sources=self.sources(), **context)
        return HTMLResponse(html, status_code=status)

    def sources(self) -> list[str]:
        """The sources to filter by: the configured ones and those in the index (counted once, at the first page)."""
        if self._known is None:
            from memex.errors import MemexError

            try:
                indexed = [c.key or c.label for c in self.archive.counts("*", by="source", limit=1000)]
            except MemexError:  # no index yet: the configured ones (the page itself says what is wrong)
                indexed = []
            self._known = sorted(set(self.configured) | set(indexed))
        return self._known

    # the pages

    def conversations(self, request: Request) -> Response:
        """Every conversation, the latest first, filtered by source and person; paged by the last one's cursor."""
        source = _text(request, "source", 200) or None
        person = _text(request, "person") or None
        before = _cursor(request, "before")
        found = self.archive.conversations(source=source, person=person, limit=PAGE + 1, before=before)
        more = found[PAGE - 1].cursor if len(found) > PAGE else None
        return self.page("conversations.html", request, conversations=found[:PAGE], source=source, person=person or "", more=more)

    def conversation(self, request: Request) -> Response:
        """One conversation, a page of it (the latest, or before/after a cursor, or around a message), by day."""
        key = _key(request)
        around = _text(request, "around") or None
        found = self.archive.conversation(
            key, around=around, before=_cursor(request, "before"), after=_cursor(request, "after"), limit=PAGE
        )
        if found is None:
            raise NotFound("No such conversation (or that message is not in it).")
        quoted = self._quoted(found.messages)
        return self.page("conversation.html", request, conv=found, days=present.days(found.messages), quoted=quoted, around=around)

    def message(self, request: Request) -> Response:
        """One message whole: its text, attachments, its HTML as mailed (framed), its history of edits and unsends."""
        key = _key(request)
        view = self.archive.message(key)
        if view is None:
            raise NotFound("No such message.")
        has_html = key.endswith(".json") and self._mail_html(key) is not None
        return self.page(
            "message.html", request, view=view, rec=view.record, has_html=has_html, remote=request.query_params.get("remote") == "1"
        )

    def mail_body(self, request: Request) -> Response:
        """A mail's HTML part, sanitised, for its sandboxed frame; remote content only with ``remote=1``."""
        key = _key(request)
        view = self.archive.message(key)
        if view is None:
            raise NotFound("No such message.")
        html = self._mail_html(key)
        if html is None:
            raise NotFound("This message has no HTML part.")
        cids = {str(a.get("id", "")).strip("<>"): f"/attachment/{a_index}/{present.url_part(key)}"
                for a_index, a in enumerate(view.record.get("attachments") or []) if isinstance(a, dict) and a.get("id")}  # fmt: skip
        remote = request.query_params.get("remote") == "1"
        return HTMLResponse(
            document(sanitise(html, cids, remote=remote)), headers={"content-security-policy": MAIL_CSP_REMOTE if remote else MAIL_CSP}
        )

    def attachment(self, request: Request) -> Response:
        """An attachment's bytes: images, audio and video of safe types inline, everything else as a download."""
        key = _key(request)
        try:
            index = int(request.path_params["index"])
        except ValueError:
            raise BadRequest("An attachment's number is a whole number.") from None
        blob = self.archive.attachment(key, index) if 0 <= index < 10_000 else None
        if blob is None:
            raise NotFound("No such attachment (or its bytes were never stored).")
        with blob.open() as fh:
            body = fh.read()
        kind = present.attachment_kind(blob.meta.mime)
        inline = kind != "file" and request.query_params.get("download") != "1"
        mime = (blob.meta.mime or "").split(";")[0].strip().lower() if inline else "application/octet-stream"
        headers = {"content-disposition": present.content_disposition(blob.meta.name, inline=inline),
                   "content-security-policy": ATTACHMENT_CSP_INLINE if inline else ATTACHMENT_CSP}  # fmt: skip
        return Response(body, media_type=mime, headers=headers)

    def search(self, request: Request) -> Response:
        """The search page: results of the query language, highlighted snippets, counts by source, person and month."""
        query = _text(request, "q", MAX_QUERY)
        order = _choice(request, "order", ["newest", "oldest", "rank"]) or "newest"
        offset = _number(request, "offset", 0, 0, 1_000_000)
        if not query.strip():
            return self.page("search.html", request, query="", order=order, results=None, counts=None, offset=0)
        results = self.archive.search(query, limit=PAGE, offset=offset, order=order, cap=offset + TOTAL_CAP)
        # by sender, not by person: the read model's counts by person cost seconds at 100,000 messages (docs/web.md)
        counts = {by: self.archive.counts(query, by=by, limit=12) for by in ("source", "sender", "month")}
        return self.page("search.html", request, query=query, order=order, results=results, counts=counts, offset=offset)

    def search_live(self, request: Request) -> Response:
        """The results part of the search page alone, for search-as-you-type (no counts: those come with the page)."""
        query = _text(request, "q", MAX_QUERY)
        order = _choice(request, "order", ["newest", "oldest", "rank"]) or "newest"
        results = self.archive.search(query, limit=PAGE, order=order, total=False) if query.strip() else None
        return self.page("_results.html", request, query=query, order=order, results=results, offset=0)

    def people(self, request: Request) -> Response:
        """Everyone the archive knows, by name; a query narrows them."""
        query = _text(request, "q") or None
        offset = _number(request, "offset", 0, 0, 1_000_000)
        found = self.archive.people(query=query, limit=PAGE + 1, offset=offset)
        return self.page("people.html", request, people=found[:PAGE], query=query or "", offset=offset, more=len(found) > PAGE)

    def person(self, request: Request) -> Response:
        """One person: handles, messages per source, conversations, and a chart of messages per month per source."""
        ref = request.path_params["ref"]
        view = self.archive.person(ref)
        if view is None:
            raise NotFound("No such person (or that name fits several: see People).")
        term = f'with:"{view.summary.id}"' if '"' not in view.summary.id else f"with:{view.summary.id}"
        per_source = {s: {c.key or c.label: c.n for c in self.archive.counts(f"{term} source:{s}", by="month", limit=1200)}
                      for s in view.sources if '"' not in s and " " not in s}  # fmt: skip
        convs = self.archive.conversations(person=view.summary.id, limit=PAGE)
        return self.page("person.html", request, view=view, chart=present.month_chart(per_source), convs=convs, term=term)

    def timeline(self, request: Request) -> Response:
        """One day or one week across every source, in time order."""
        span = _choice(request, "span", ["day", "week"]) or "day"
        default = self._newest_day()
        start = present.parse_day(request.query_params.get("day"), default)
        if not 1900 <= start.year <= 9000:
            raise BadRequest("The day is from the year 1900 to 9000.")
        if span == "week":
            start -= timedelta(days=start.weekday())
        end = start + timedelta(days=6 if span == "week" else 0)
        messages = self.archive.timeline(start, end, limit=TIMELINE)
        step = timedelta(days=7 if span == "week" else 1)
        return self.page("timeline.html", request, span=span, start=start, end=end, days=present.days(messages), count=len(messages), full=len(messages) >= TIMELINE,
                         prev=(start - step).isoformat(), next=(start + step).isoformat())  # fmt: skip

    def sources_page(self, request: Request) -> Response:
        """The health of every source, as ``memex status`` shows it; the page refreshes its table by itself."""
        template = "_sources.html" if request.query_params.get("part") == "table" else "sources.html"
        return self.page(template, request, health=self.archive.sources(), now=datetime.now(UTC))

    # helpers

    def _quoted(self, messages: list[Any]) -> dict[str, Any]:
        """The messages those of a page reply to, by key: from the page, else read (their record's sender and text)."""
        here = {m.key: m for m in messages}
        out: dict[str, Any] = {}
        for m in messages:
            if m.reply_to and m.reply_to not in out:
                if m.reply_to in here:
                    q = here[m.reply_to]
                    out[m.reply_to] = {"sender": q.sender, "text": q.text}
                else:
                    view = self.archive.message(m.reply_to)
                    if view is not None:
                        sender = view.record.get("sender") or {}
                        who = "me" if sender.get("is_me") else sender.get("name") or sender.get("id") or ""
                        out[m.reply_to] = {"sender": who, "text": view.record.get("text") or ""}
        return out

    def _mail_html(self, key: str) -> str | None:
        """The HTML part of the mail stored beside the record at ``key`` (None when none).

        TODO(read-model): the read model lists a mail's attachments from its ``.eml`` but has no call for its HTML
        body; this reads the stored mail through the archive's store (read-only) until it has one.
        """
        if not (key.startswith("messages/") and key.endswith(".json")) or ".." in key.split("/"):
            return None
        raw = self.archive.store.get(key[: -len(".json")] + ".eml")
        return html_part(raw) if raw else None

    def _newest_day(self) -> date:
        """The day of the newest message (the timeline's default), today when the archive is empty."""
        found = self.archive.search("*", limit=1, total=False)
        sent = found.hits[0].sent if found.hits else None
        return sent.date() if sent is not None else datetime.now(UTC).date()


def _key(request: Request) -> str:
    """The store key a URL names (a message's): never one that climbs out of its folder or is absolute."""
    key = request.path_params["key"]
    if not key or key.startswith("/") or "\\" in key or "\x00" in key or ".." in key.split("/") or len(key) > 2000:
        raise BadRequest("That is not a message's key: follow the pages' own links.")
    return str(key)


def _text(request: Request, name: str, limit: int = 500) -> str:
    value = request.query_params.get(name, "")
    if len(value) > limit:
        raise BadRequest(f"The parameter {name} is too long (at most {limit} characters).")
    return value


def _choice(request: Request, name: str, allowed: list[str]) -> str | None:
    value = request.query_params.get(name) or None
    if value is not None and value not in allowed:
        raise BadRequest(f"Unknown {name}: pick one from the list.")
    return value


def _cursor(request: Request, name: str) -> str | None:
    value = request.query_params.get(name) or None
    if value is not None and not (value.removeprefix("-").isdigit() and len(value) < 21):
        raise BadRequest(f"The parameter {name} is a page's cursor: follow the page's own links.")
    return value


def _number(request: Request, name: str, default: int, low: int, high: int) -> int:
    value = request.query_params.get(name)
    if not value:
        return default
    if not value.isdigit() or not low <= int(value) <= high:
        raise BadRequest(f"The parameter {name} is a whole number from {low} to {high}.")
    return int(value)
