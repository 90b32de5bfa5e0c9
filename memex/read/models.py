"""The read model's answers: plain, immutable values a front end renders (the CLI, ``memex mcp``, the web view).

Each is a frozen dataclass of plain values (text, numbers, UTC datetimes, lists of other answers); a front end never
sees a row or a connection. Text is the archive's own (message content is data: a renderer escapes it for its medium).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any


@dataclass(frozen=True, slots=True)
class Snippet:
    """A piece of a message's text around the words a search matched: ``text`` and the matched words in it as
    ``(start, end)`` character offsets (never HTML; a renderer marks them its own way)."""

    text: str
    highlights: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Hit:
    """One message a search found."""

    key: str
    source: str
    conversation: int  # the index's conversation (thread) key: ConversationSummary.key, Archive.conversation()
    conversation_name: str | None  # the chat's name or ID, as the source gave it
    sender: str  # a display name: the name the sender used, else their ID, "me" for the user
    from_me: bool
    sent: datetime | None  # UTC; None when the source gave no time
    subject: str | None
    snippet: Snippet
    native_id: str = ""
    edited: bool = False
    deleted: bool = False
    attachments: int = 0


@dataclass(frozen=True, slots=True)
class SearchPage:
    """A page of a search: ``total`` matches (None when not counted) and the ``hits`` of this page; ``more``: there
    are more than ``total`` (a count stopped at its cap, :meth:`memex.read.archive.Archive.search`)."""

    total: int | None
    hits: list[Hit]
    more: bool = False


@dataclass(frozen=True, slots=True)
class Count:
    """One group of a count: what to show (``label``), what to ask next with (``key``: a sender's ID, a
    conversation's key, a month ``YYYY-MM``, a day ``YYYY-MM-DD``, a source, a person's ID) and how many."""

    label: str
    key: str | None
    n: int


@dataclass(frozen=True, slots=True)
class AttachmentMeta:
    """One attachment of a message, listed (never its bytes): its place in the message's list (``index``), name,
    type, size, the store key of its bytes (``attachments/<sha256>``; None for one inside a stored mail, ``in_mail``,
    or when the source had none to store, ``missing``)."""

    index: int
    name: str | None
    mime: str | None
    size: int | None
    sha256: str | None
    key: str | None
    missing: bool = False
    in_mail: bool = False  # its bytes are inside the stored mail (``.eml``) beside the record, not an object of their own


@dataclass(frozen=True, slots=True)
class AttachmentBlob:
    """An attachment's metadata and a way to read its bytes from the store (``open()``: a binary file object)."""

    meta: AttachmentMeta
    opener: Callable[[], IO[bytes]]

    def open(self) -> IO[bytes]:
        """The attachment's bytes, as a binary file object (close it when done)."""
        return self.opener()


@dataclass(frozen=True, slots=True)
class MessageSummary:
    """One message as a list shows it (a conversation's page, a timeline): from the index, not the store."""

    key: str
    source: str
    sender: str
    from_me: bool
    sent: datetime | None
    text: str
    subject: str | None
    kind: str  # "message" (a chat's), "email" (a message with a subject), "event"
    edited: bool
    unsent: bool
    reactions: list[str]
    reply_to: str | None
    attachments: list[AttachmentMeta]
    conversation: int
    sender_id: str | None = None


@dataclass(frozen=True, slots=True)
class Revision:
    """One revision of a message: its store key, kind (edit, delete, reactions, update), when, and its record."""

    key: str
    kind: str
    at: str | None
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MessageView:
    """One message whole: its current record (the store's, with the latest edit's text as ``text``), the original
    record, its revisions oldest first, attachments listed, reactions (the latest reactions revision's) and the key
    of the message it replies to (when the index has it)."""

    key: str
    record: dict[str, Any]
    original: dict[str, Any]
    revisions: list[Revision]
    attachments: list[AttachmentMeta]
    reactions: list[str]
    reply_to: str | None
    conversation: int | None


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """One conversation (a chat, or a mail thread joined by its references): its key (the index's thread), source,
    title, people (display names, in order of their first message), last message and how many messages."""

    key: int
    source: str
    title: str
    people: list[str]
    last: MessageSummary | None
    count: int
    cursor: str = ""  # give as ``before=`` to :meth:`memex.read.archive.Archive.conversations` for the ones after it


@dataclass(frozen=True, slots=True)
class ConversationPage:
    """A page of a conversation, oldest to newest, with the cursors of the pages before and after it (None at an
    end): give one back as ``before=``/``after=`` to :meth:`memex.read.archive.Archive.conversation`."""

    summary: ConversationSummary
    messages: list[MessageSummary]
    prev_cursor: str | None
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class PersonSummary:
    """One person across sources: ID (``with:ID`` in a search), name, handles, messages per source."""

    id: str
    name: str | None
    handles: list[str]
    messages: dict[str, int]
    origins: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PersonView:
    """One person: their summary, and the keys of their conversations (most recent first)."""

    summary: PersonSummary
    handles: list[str]
    sources: dict[str, int]
    conversations: list[int]


@dataclass(frozen=True, slots=True)
class SourceHealth:
    """One configured source as ``memex status`` shows it."""

    name: str
    type: str
    state: str
    state_reason: str
    cursor: str
    last_poll: str | None
    last_ok: str | None
    last_error: str | None
    enabled: bool = True
