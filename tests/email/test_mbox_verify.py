"""``memex verify`` on an mbox source: mails up to each file's offset are listed, a lost record is found and restored."""

from __future__ import annotations

from pathlib import Path

from memex.records import message_key
from memex.registry import make_poller
from memex.runner import poll
from memex.state.backend import cursor_store
from memex.verify import verify
from tests.email.test_mbox import mail, mbox_of, setup


def test_inventory_lists_the_mails_the_cursor_passed_and_repair_restores_a_lost_record(tmp_path: Path) -> None:
    """Three polled mails are listed by Message-ID with their ``file@offset`` (a fourth, appended after the poll, is not);
    a deleted record is reported missing and ``--repair`` restores it byte for byte; a rewritten file is not checked."""
    box = tmp_path / "Inbox"
    box.write_bytes(mbox_of([mail(n) for n in range(3)]))
    cfg = setup(tmp_path, box)
    assert poll(cfg, "mb").new == 3
    with box.open("ab") as fh:
        fh.write(mbox_of([mail(3)]))
    poller = make_poller(cfg.source("mb"))
    listed = list(poller.inventory(cursor_store(cfg).cursor("mb")))  # type: ignore[attr-defined]
    assert [e.native_id for e in listed] == ["mb0@example.com", "mb1@example.com", "mb2@example.com"]
    store = cfg.state_dir / "store"
    key = message_key("mb", "mb1@example.com")
    sound = (store / key).read_bytes()
    (store / key).unlink()
    report = verify(cfg).to_json()["sources"]["mb"]
    assert report["damage"]["missing_from_source"] == 1 and report["examples"]["missing_from_source"][0]["ref"] == listed[1].ref
    fixed = verify(cfg, repair=True).to_json()
    assert fixed["whole"] is True and fixed["sources"]["mb"]["repaired"] == {"restored": 1}
    assert (store / key).read_bytes() == sound
    box.write_bytes(mbox_of([mail(9)]))
    assert [getattr(e, "why", "") for e in poller.inventory(cursor_store(cfg).cursor("mb"))] == [  # type: ignore[attr-defined]
        "Inbox: rewritten since it was read (the next poll reads it again)"
    ]
