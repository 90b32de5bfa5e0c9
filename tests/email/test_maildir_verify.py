"""``memex verify`` on a Maildir source: files up to the cursor are listed, a lost record is found and --repair restores it."""

from __future__ import annotations

from pathlib import Path

from memex.records import message_key
from memex.registry import make_poller
from memex.runner import poll
from memex.verify import verify
from tests.email.test_maildir import deliver, mail, make_maildir, setup


def test_inventory_lists_the_files_the_cursor_passed_and_repair_restores_a_lost_record(tmp_path: Path) -> None:
    """Three delivered mails are listed by Message-ID (a fourth, after the cursor, is not); a deleted record is restored."""
    root = make_maildir(tmp_path / "Mail")
    for n in range(3):
        deliver(root, f"{n}.host", mail(n))
    cfg = setup(tmp_path, root)
    assert poll(cfg, "md").new == 3
    deliver(root, "3.host", mail(3))  # not polled yet: past the cursor, not expected in the index
    poller = make_poller(cfg.source("md"))
    from memex.state.backend import cursor_store

    listed = list(poller.inventory(cursor_store(cfg).cursor("md")))  # type: ignore[attr-defined]
    assert sorted(e.native_id for e in listed) == ["m0@example.com", "m1@example.com", "m2@example.com"]
    store = cfg.state_dir / "store"
    key = message_key("md", "m1@example.com")
    sound = (store / key).read_bytes()
    (store / key).unlink()
    report = verify(cfg).to_json()["sources"]["md"]
    assert report["damage"]["missing_from_source"] == 1 and report["examples"]["missing_from_source"][0]["ref"] == "INBOX/1.host"
    (store / message_key("md", "m2@example.com")).write_bytes(b"")
    fixed = verify(cfg, repair=True).to_json()
    assert fixed["whole"] is True and fixed["sources"]["md"]["repaired"] == {"restored": 1, "replaced": 1}
    assert (store / key).read_bytes() == sound
    assert (store / message_key("md", "m2@example.com")).stat().st_size > 0
