"""``memex verify`` for an mbox source: every mail before each file's offset, and re-reading one by its ``file@offset``.

A file is listed only if it is still the file that was read (the cursor's checks, :meth:`MboxPoller._same_file`);
one gone or rewritten since is reported as not checked (its next poll reads it again). A source with ``into`` stores
its records under another source's name, whose own inventory covers them: it is reported as not checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from memex.plugin import Cursor, Item, Listed, Unchecked
from pollers.email.mbox.read import Mail, Reader


class MboxPoller(Protocol):
    """What the inventory reads of :class:`pollers.email.mbox.poller.MboxPoller` (declared here, so neither module imports the
    other: the poller imports this one when ``memex verify`` asks)."""

    name: str
    into: str
    root: Path
    variant: str

    @staticmethod
    def _same_file(path: Path, entry: dict[str, Any], size: int) -> bool: ...

    def _item(self, rel: str, mail: Mail, warnings: list[str], to_item: Callable[..., Item]) -> Item | None: ...


def inventory(poller: MboxPoller, cursor: Cursor) -> Iterator[Listed | Unchecked]:
    """Each mail each file of the cursor holds before its offset, rendered for its native ID as a poll does."""
    if poller.into != poller.name:
        yield Unchecked(f"its mails are stored as source {poller.into!r}: verify that source")
        return
    for rel, entry in sorted(((cursor or {}).get("files") or {}).items()):
        path = _path(poller, rel)
        try:
            size = path.stat().st_size
            same = poller._same_file(path, entry, size)
        except OSError:
            yield Unchecked(f"{rel}: gone since it was read")
            continue
        if not same:
            yield Unchecked(f"{rel}: rewritten since it was read (the next poll reads it again)")
            continue
        offset = int(entry.get("offset", 0))
        with path.open("rb") as fh:
            for mail in Reader(fh, 0, poller.variant).mails():
                if mail.end > offset:
                    break
                item = poller._item(rel, mail, [], _to_item())
                native_id = item.message.native_id if item and item.message else item.failure.native_id if item and item.failure else None
                if native_id is not None:
                    yield Listed(native_id, f"{rel}@{mail.start}")


def reread(poller: MboxPoller, refs: list[str]) -> Iterator[Item]:
    """The items of the mails at ``refs`` (``file@offset``), read again; a ref whose file or mail is gone is skipped."""
    for ref in refs:
        rel, _, at = ref.rpartition("@")
        if not at.isdigit():
            continue
        try:
            fh = _path(poller, rel).open("rb")
        except OSError:
            continue
        with fh:
            mail = next(Reader(fh, int(at), poller.variant).mails(), None)
        if mail is not None and mail.start == int(at):
            item = poller._item(rel, mail, [], _to_item())
            if item is not None:
                yield item


def _path(poller: MboxPoller, rel: str) -> Path:
    return poller.root if poller.root.is_file() else poller.root / rel


def _to_item() -> Any:
    from pollers.email.mail.render import to_item

    return to_item
