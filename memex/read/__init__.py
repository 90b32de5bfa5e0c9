"""The read model: one read-only package answering every question asked of the archive.

``memex search``, ``memex show``, ``memex people``, ``memex mcp`` and ``memex serve`` render its answers; besides the
index's writer (:mod:`memex.search.index`, :mod:`memex.search.build`, :mod:`memex.search.bulk`,
:mod:`memex.search.schema`) and the query compiler it uses (:mod:`memex.search.query`), it is the only code holding
SQL for the index's tables (``tools/check_sql.py``, run by ``make lint``, fails otherwise). It opens the index with
``mode=ro`` and imports nothing that writes.

The API (agreed with the web view; names are kept, fields may be added)::

    from memex.read import Archive, open_archive      # open_archive(cfg, store=None) -> Archive (index mode=ro, per call)
    Archive(cfg, store=None, *, follow_people=False)  # follow_people: a with: term updates the handles file first, as
                                                      # `memex search` does (the index and the store: never written)
    a.search(query, *, limit=50, offset=0, order="newest"|"oldest"|"rank", total=True, cap=None)
        -> SearchPage(total, hits: list[Hit], more)   # cap=N: counted up to N (total == N and more when there are more)
        # Hit: key, source, conversation (thread key, int), sender (display), sent (datetime UTC | None), subject,
        # snippet: Snippet(text, highlights: ((start, end), ...)), plus native_id, edited, deleted, attachments
    a.counts(query, by="source"|"person"|"sender"|"month"|"day"|"conversation", limit=50) -> list[Count(label, key, n)]
    a.message(key) -> MessageView | None    # record (current: latest edit's text), original, revisions: list[Revision],
                                            # attachments: list[AttachmentMeta(index, name, mime, size, sha256, key)],
                                            # reactions, reply_to (key), conversation (thread key)
    a.conversations(*, source=None, person=None, limit=50, before=None) -> list[ConversationSummary]
        # ConversationSummary: key (int), source, title, people, last (MessageSummary), count, cursor;
        # the next page: before=<the list's last one's cursor>
    a.conversation(key, *, around=None, before=None, after=None, limit=50) -> ConversationPage | None
        # summary, messages (oldest -> newest), prev_cursor (give as before=), next_cursor (give as after=);
        # with none of around/before/after: the latest page. MessageSummary: key, source, sender, from_me, sent,
        # text, subject, kind (message|email|event), edited, unsent, reactions, reply_to, attachments, conversation
    a.person(ref) -> PersonView | None      # summary, handles, sources (messages per source), conversations (keys)
    a.people(*, query=None, limit=50, offset=0) -> list[PersonSummary(id, name, handles, messages, origins)]
    a.timeline(start: date, end: date, *, limit=500) -> list[MessageSummary]   # both days in, UTC, time order
    a.attachment(message_key, index) -> AttachmentBlob | None                  # .meta, .open() -> binary file
    a.sources() -> list[SourceHealth]      # name, type, state, state_reason, cursor, last_poll, last_ok, last_error
    a.close()

Errors: :class:`ReadError` (one line, what to do; a :class:`memex.errors.StateError`), :class:`QueryError` (a query
that cannot be read: the parser's line, exit 2).

While ``memex watch`` or ``memex serve`` runs, :func:`memex.read.socket.serve_socket` answers ``memex search`` and
``memex show`` over a Unix socket in the state folder (:mod:`memex.read.client` asks it)::

    from memex.read.socket import serve_socket
    handle = serve_socket(Archive(cfg, follow_people=True), cfg.state_dir)   # its own daemon thread
    ...
    handle.close()                                   # handle.serving: False when another live server holds it

This module imports its names lazily, so the socket's thin client (:mod:`memex.read.client`) loads nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memex.read.archive import Archive, open_archive
    from memex.read.errors import QueryError, ReadError
    from memex.read.models import (
        AttachmentBlob,
        AttachmentMeta,
        ConversationPage,
        ConversationSummary,
        Count,
        Hit,
        MessageSummary,
        MessageView,
        PersonSummary,
        PersonView,
        Revision,
        SearchPage,
        Snippet,
        SourceHealth,
    )

__all__ = ["Archive", "AttachmentBlob", "AttachmentMeta", "ConversationPage", "ConversationSummary", "Count", "Hit",
           "MessageSummary", "MessageView", "PersonSummary", "PersonView", "QueryError", "ReadError", "Revision",
           "SearchPage", "Snippet", "SourceHealth", "open_archive"]  # fmt: skip

_WHERE = {"Archive": "archive", "open_archive": "archive", "QueryError": "errors", "ReadError": "errors"}


def __getattr__(name: str) -> Any:
    """The package's names, imported on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'memex.read' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"memex.read.{_WHERE.get(name, 'models')}"), name)
