"""The iMessage inventory for ``memex verify``: chat.db GUIDs up to the cursor's ROWID, and rows read again by ROWID."""

from __future__ import annotations

from pathlib import Path

from pollers.imessage import samples
from tests.imessage.test_imessage import poller_for


def test_inventory_stops_at_the_cursor_and_reread_renders_the_rows(tmp_path: Path) -> None:
    """Rows up to the cursor's ROWID are listed in order (later ones are not); reread gives each row's original record."""
    db = tmp_path / "chat.db"
    samples.build(db, 12)
    poller = poller_for(db)
    try:
        listed = list(poller.inventory({"rowid": 8}))
        assert [e.ref for e in listed] == [str(n) for n in range(1, 9)]
        assert list(poller.inventory(None)) == []
        items = list(poller.reread([listed[6].ref, listed[2].ref]))
        originals = [i.message for i in items if i.message is not None and i.message.revision is None]
        assert [m.native_id for m in originals] == [listed[2].native_id, listed[6].native_id]
    finally:
        poller.close()
