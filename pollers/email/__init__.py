"""Email: IMAP mailboxes (``type = "imap"``) and local Maildirs (``type = "maildir"``), one renderer for both.

``imap`` with ``session``, ``wire`` and ``utf7`` speak IMAP; ``maildir`` reads ``new/`` and ``cur/``;
``headers``, ``parts`` and ``render`` turn one RFC 5322 mail into a record, its attachments and its raw bytes.
"""

from __future__ import annotations

from memex.config import SourceConfig
from memex.source import Poller

__all__ = ["make"]


def make(source: SourceConfig) -> Poller:
    """The IMAP or Maildir poller for ``source``, by its ``type``."""
    if source.type == "maildir":
        from pollers.email.maildir import make as make_maildir

        return make_maildir(source)
    from pollers.email.imap import make as make_imap

    return make_imap(source)
