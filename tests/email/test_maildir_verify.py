"""``memex verify`` on a Maildir source: files up to the cursor are listed, a lost record is found and --repair restores it."""

from __future__ import annotations

from pathlib import Path

from memex.records import message_key
from memex.registry import make_poller
from memex.runner import poll
from memex.source import Item
from memex.store import open_store
from memex.verify import verify
from memex.verify.checks import EMPTY, place
from memex.verify.inventory import Fixer
from memex.verify.report import SourceReport
from memex.verify.walk import Seen
from pollers.email.mail import render
from tests.conftest import file_objects, read_log
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


def test_a_zero_byte_file_is_quarantined_as_no_mail_and_verify_stays_whole(tmp_path: Path) -> None:
    """A 0-byte file is reported (quarantined: "empty (0 bytes): not a mail"), not stored as a message; verify is whole."""
    root = make_maildir(tmp_path / "Mail")
    deliver(root, "0.host", mail(0))
    deliver(root, "1.host", b"")
    cfg = setup(tmp_path, root)
    result = poll(cfg, "md")
    assert (result.new, result.quarantined) == (1, 1)
    [entry] = [e for e in read_log(cfg.state_dir, "md") if e["event"] == "record.quarantined"]
    assert entry["level"] == "warning" and entry["ref"] == "INBOX/1.host" and entry["reason"] == "empty (0 bytes): not a mail"
    assert not [k for k in file_objects(cfg.state_dir / "store") if k.endswith(".eml") and k.startswith("messages/") and "sha256" in k]
    for repair in (False, True):
        report = verify(cfg, repair=repair).to_json()
        assert report["whole"] is True and report["sources"]["md"]["quarantined"] == 1
        assert report["sources"]["md"]["repaired"] == {}


def test_an_empty_eml_stored_by_an_older_memex_from_an_empty_file_is_whole_not_damage(tmp_path: Path) -> None:
    """A record with an empty .eml, made from a 0-byte file as memex once did, equals the source: whole, nothing "replaced"."""
    root = make_maildir(tmp_path / "Mail")
    deliver(root, "1.host", b"")
    cfg = setup(tmp_path, root)
    assert poll(cfg, "md").quarantined == 1
    message, _ = render._render(b"", "md", frozenset(), {"folder": "INBOX", "maildir_key": "1.host"})  # how it was stored then
    store = open_store(cfg.store)
    key = message.key()
    assert store.put_new(key[: -len(".json")] + ".eml", b"") and store.put_new(key, message.to_json())
    store.sync()
    for repair in (False, True):
        report = verify(cfg, repair=repair).to_json()
        assert report["whole"] is True, report["sources"]["md"]
        assert report["sources"]["md"]["damage"]["empty"] == 0 and report["sources"]["md"]["repaired"] == {}


def test_a_damaged_object_whose_source_holds_the_same_bytes_is_not_claimed_replaced(tmp_path: Path) -> None:
    """--repair meets an empty blob whose re-read is empty too: no "replaced", and the report says why (not "source lost it")."""
    root = make_maildir(tmp_path / "Mail")
    cfg = setup(tmp_path, root)
    message, _ = render._render(b"", "md", frozenset(), {"folder": "INBOX", "maildir_key": "1.host", "size": 1})  # a record that disagrees
    store = open_store(cfg.store)
    eml = message.key()[: -len(".json")] + ".eml"
    assert store.put_new(eml, b"") and store.put_new(message.key(), message.to_json())
    part = SourceReport("md")
    fixer = Fixer(cfg, store, "md", part, {eml: Seen(eml, place(eml), (EMPTY, "0 bytes"))})
    fixer.store_items(iter([Item(cursor=None, message=message, blobs={".eml": b""})]))  # what a re-read of the source gives
    fixer.finish()
    assert part.repaired == {} and store.get(eml) == b""
    assert len(part.not_repaired) == 1 and "the source holds exactly these bytes" in part.not_repaired[0]
