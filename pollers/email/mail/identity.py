"""When two mails with one Message-ID are the same mail: the fingerprint the collision check compares.

Two mails that share a Message-ID are one mail only if their sender, Date, Subject, recipients (To and Cc, as
parsed addresses, lower case, in any order) and every MIME part (its Content-Type and Content-Disposition, its
decoded bytes with line ends made LF unless base64 carried them, and the headers of an attached message) agree. Transport headers (Received, Return-Path, Delivered-To, X-*,
DKIM/ARC signatures, Authentication-Results, ...) may differ: the same mail in INBOX and in an archive folder,
under two Gmail labels, or redelivered, stays one object. Bcc is left out on purpose: RFC 5322 §3.6.3 has the
sender's copy keep the Bcc line while the delivered copies lose it, and both are the same mail.

The values are read as sent (Subject and Date undecoded, whitespace runs made one space), so a change in how
memex decodes text never changes a mail's fingerprint. :func:`legacy_fingerprint` is the rule memex used before
(From, Date, Subject, text): a record stored under it is found again (see :mod:`memex.store.collisions`).
"""

from __future__ import annotations

import email.message
import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any, overload

from memex.plugin import fingerprint
from pollers.email.mail.headers import addresses, clean, raw, raw_all

_BARE_CR = re.compile(rb"\r(?!\n)")  # a CR that does not start a CRLF
RULE = "email-2"  # names this rule inside the fingerprint, so no earlier rule's fingerprint can equal it


def _flat(value: str | None) -> str | None:
    return None if value is None else re.sub(r"\s+", " ", clean(value)).strip()


def _addresses(msg: email.message.Message, name: str, known: dict[str, list[tuple[str, str]]] | None) -> list[str]:
    pairs = known[name] if known is not None and name in known else addresses(msg, name, [])
    return sorted({addr.lower() for _, addr in pairs})


def _payload(part: email.message.Message) -> bytes:
    """The decoded bytes; line ends made LF unless base64 carried them (a Maildir file's LF, IMAP's CRLF: one mail)."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        payload = str(part.get_payload()).encode("utf-8", "surrogateescape")
    if clean(raw(part, "Content-Transfer-Encoding") or "").strip().lower() != "base64":
        # Every CR ends a CRLF (most mail): dropping the CRs is CRLF to LF, and a one-byte replace runs several times
        # faster than a two-byte one. Else CRLF to LF, then each bare CR to LF.
        bare = _BARE_CR.search(payload) is not None
        payload = payload.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if bare else payload.replace(b"\r", b"")
    return payload


def _parts(part: email.message.Message, out: list[Any], *, headers: bool) -> None:
    """Append what identifies ``part`` and everything inside it: type, file name, decoded bytes' digest."""
    if headers:  # an attached message: its own headers are part of its bytes
        out.append([[k.lower(), _flat(str(v))] for k, v in part.raw_items()])
    ctype = part.get_content_type()
    name = _flat(raw(part, "Content-Disposition")), _flat(raw(part, "Content-Type"))
    if part.is_multipart():
        out.append([ctype])
        inner = part.get_content_maintype() == "message"
        for child in part.get_payload():
            if isinstance(child, email.message.Message):
                _parts(child, out, headers=inner)
        return
    out.append([ctype, name, hashlib.sha256(_payload(part)).hexdigest()])


def mail_fingerprint(msg: email.message.Message, raw_mail: bytes, known: dict[str, list[tuple[str, str]]] | None = None) -> str:
    """The fingerprint of a parsed mail under the rule in this module's docstring (never raises).

    ``known``: the From, To and Cc pairs :func:`~pollers.email.mail.headers.addresses` already gave for this message
    (the renderer has them), so they are not parsed twice.
    """
    try:
        body: list[Any] = []
        _parts(msg, body, headers=False)
    except Exception:  # a part the parser cannot decode: the body's bytes as sent stand for all parts
        _, _, rest = raw_mail.replace(b"\r\n", b"\n").partition(b"\n\n")
        body = ["raw", hashlib.sha256(rest).hexdigest()]
    return fingerprint(
        RULE,
        _addresses(msg, "From", known),
        [_flat(v) for v in raw_all(msg, "Date")],
        [_flat(v) for v in raw_all(msg, "Subject")],
        _addresses(msg, "To", known),
        _addresses(msg, "Cc", known),
        body,
    )


def legacy_fingerprint(sender: str, date_header: str | None, subject: str | None, text: str | None) -> str:
    """The rule before this one (From, Date, Subject, text): where a collision stored by it sits."""
    return fingerprint(sender, clean(date_header) if date_header else None, subject, text)


class Later(Sequence[str]):
    """Fingerprints computed when first read: a mail's earlier-rule fingerprint (a JSON and a SHA-256 of its whole text)
    is needed only when its name is found taken (:mod:`memex.store.collisions`), which most mail never is."""

    def __init__(self, compute: Callable[[], tuple[str, ...]]) -> None:
        self._compute: Callable[[], tuple[str, ...]] | None = compute
        self._values: tuple[str, ...] = ()

    def _get(self) -> tuple[str, ...]:
        if self._compute is not None:
            self._values, self._compute = self._compute(), None
        return self._values

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        """The fingerprint at ``index`` (computed on first use)."""
        return self._get()[index]

    def __len__(self) -> int:
        """How many (computed on first use)."""
        return len(self._get())
