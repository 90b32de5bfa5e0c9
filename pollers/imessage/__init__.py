"""iMessage (``type = "imessage"``): macOS ``~/Library/Messages/chat.db``, read-only, in WAL mode beside Messages.app.

``poller`` reads the database, ``rows`` turns its rows into records, ``edits`` the edit and unsend history,
``typedstream`` decodes ``attributedBody``; ``samples`` builds a chat.db in the real schema for the demo.
"""

from __future__ import annotations

from pathlib import Path

from pollers.imessage.poller import make

__all__ = ["make", "sample"]


def sample(db: Path, count: int) -> str:
    """Create ``db`` with ``count`` generated messages, or add five to an existing one; a line saying which."""
    from datetime import UTC, datetime, timedelta

    from pollers.imessage import samples

    if not db.exists():
        now = datetime.now(UTC)
        samples.build(db, count, seed=1, start=now - timedelta(seconds=97 * count), end=now)
        return f"created {db} with {count} sample messages"
    added = samples.append(db, 5, seed=int(datetime.now(UTC).timestamp()))
    return f"{added} new messages arrived in {db}"
