"""Email: IMAP mailboxes (``type = "imap"``), local Maildirs (``type = "maildir"``) and mbox files (``type = "mbox"``), one renderer.

``imap`` with ``session``, ``wire`` and ``utf7`` speak IMAP; ``maildir`` reads ``new/`` and ``cur/``; ``mbox`` with
``mbox_read`` reads mbox files (Takeout, Thunderbird, Apple Mail);
``headers``, ``parts`` and ``render`` turn one RFC 5322 mail into a record, its attachments and its raw bytes.
"""

from __future__ import annotations

from memex.plugin import Poller, SourceConfig

__all__ = ["make"]


def make(source: SourceConfig) -> Poller:
    """The IMAP, Maildir or mbox poller for ``source``, by its ``type``."""
    if source.type == "mbox":
        from pollers.email.mbox.poller import make as make_mbox

        return make_mbox(source)
    if source.type == "maildir":
        from pollers.email.maildir.poller import make as make_maildir

        return make_maildir(source)
    from pollers.email.imap.poller import make as make_imap

    return make_imap(source)
