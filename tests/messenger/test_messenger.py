"""Messenger exports (pollers/messenger*.py) on generated exports in the real formats: overlap, renames, same
millisecond, unsent and reactions as revisions, media, both layouts, the encrypted-chat export."""

from __future__ import annotations

import json
import os
import random
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from memex.errors import ConfigError
from memex.records import canonical_json, rfc3339
from memex.registry import make_poller
from memex.runner import poll
from pollers.messenger.parse import _sent_at, repair
from tests.conftest import assert_valid, file_objects, run_cli, stored_records, write_config
from tests.messenger.messenger_fixtures import ALICE, ME, T0, Export, Thread, e2ee_files, e2ee_msg, fb, msg, write_dir, write_zip

BOB = "Bob Ørsted"


def setup(tmp_path: Path, **keys: Any) -> memex_config.Config:
    """A config with one messenger source ``fbm`` reading ``tmp_path/inbox`` (settle 0)."""
    inbox = tmp_path / "inbox"
    inbox.mkdir(exist_ok=True)
    table = {"type": "messenger", "inbox": str(inbox), "settle_seconds": 0, "me": ME, **keys}
    return memex_config.load(write_config(tmp_path, {"fbm": table}))


def originals(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """native id -> stored original record."""
    objs = file_objects(tmp_path / "state" / "store", "messages/")
    return {d["native_id"]: d for d in (json.loads(b) for b in objs.values())}


def revisions(tmp_path: Path) -> list[dict[str, Any]]:
    """Every stored revision record."""
    return [json.loads(b) for b in file_objects(tmp_path / "state" / "store", "revisions/").values()]


def by_text(tmp_path: Path) -> dict[str | None, dict[str, Any]]:
    """text -> original record (texts are unique in these tests)."""
    return {d["text"]: d for d in originals(tmp_path).values()}


def alice_thread(messages: list[dict[str, Any]], folder: str = "alicengstrom_1234567890") -> Thread:
    """The 1:1 thread with Alice."""
    return Thread(folder, [ALICE, ME], messages)


def test_repair_is_lossless() -> None:
    """The latin-1 round trip gives back what was written, emoji and CJK included; text that was never mangled
    (characters above U+00FF, or a lone é) is kept as it is, never dropped."""
    for text in ("héllo 🎉", "日本語のテキスト", "Ünïcödé", "plain"):
        assert repair(fb(text)) == text
    for proper in ("日本 €", "café", "naïve ✓"):
        assert repair(proper) == proper


def test_two_overlapping_exports_in_both_layouts_store_each_message_once(tmp_path: Path) -> None:
    """An older export (messages/ layout, zip) and a newer one (your_facebook_activity/ layout, folder) overlap:
    every message is one object, text and names repaired, is_me set from ``me``."""
    cfg = setup(tmp_path)
    older = [msg(ALICE, T0 + i * 1000, f"m{i} 日本 🎉") for i in range(5)] + [msg(ME, T0 + 500, "von mir ü")]
    newer = older[2:] + [msg(ALICE, T0 + i * 1000, f"m{i} 日本 🎉") for i in range(5, 9)]
    write_zip(tmp_path / "inbox" / "facebook-old.zip", Export([alice_thread(older, "alice_1")]).files())
    first = poll(cfg, "fbm")
    assert (first.status, first.new, first.dup) == ("ok", 6, 0)
    write_dir(tmp_path / "inbox" / "facebook-new", Export([alice_thread(newer, "alice_1")], new_layout=True).files())
    second = poll(cfg, "fbm")
    assert (second.new, second.dup) == (4, 4)
    texts = by_text(tmp_path)
    assert sorted(t for t in texts if t) == sorted([f"m{i} 日本 🎉" for i in range(9)] + ["von mir ü"])
    mine = texts["von mir ü"]
    assert mine["sender"] == {"id": None, "name": ME, "is_me": True}
    assert mine["conversation"]["participants"] == sorted([ALICE, ME])
    assert texts["m0 日本 🎉"]["sender"]["name"] == ALICE and not texts["m0 日本 🎉"]["sender"]["is_me"]
    assert poll(cfg, "fbm").status == "idle"


def test_a_renamed_thread_folder_keeps_ids_a_renamed_participant_is_stored_again(tmp_path: Path) -> None:
    """The folder name is not part of the ID (same participants, new folder: nothing new). A participant who
    renamed changes the thread key and the sender: that thread's messages are stored again under new IDs
    (duplicates, the documented limit), none lost, other threads untouched."""
    cfg = setup(tmp_path)
    alice = [msg(ALICE, T0 + i, f"a{i}") for i in range(3)]
    bob = [msg(BOB, T0 + i, f"b{i}") for i in range(2)]
    write_zip(tmp_path / "inbox" / "one.zip", Export([alice_thread(alice), Thread("bob_1", [BOB, ME], bob)]).files())
    assert poll(cfg, "fbm").new == 5
    write_zip(tmp_path / "inbox" / "two.zip", Export([alice_thread(alice, "alicenew_1234567890"), Thread("bob_1", [BOB, ME], bob)]).files())
    again = poll(cfg, "fbm")
    assert (again.new, again.dup) == (0, 5)
    renamed = [msg("Alice Renamed", T0 + i, f"a{i}") for i in range(3)]
    write_zip(
        tmp_path / "inbox" / "three.zip",
        Export([Thread("alicerenamed_9", ["Alice Renamed", ME], renamed), Thread("bob_1", [BOB, ME], bob)]).files(),
    )
    third = poll(cfg, "fbm")
    assert (third.new, third.dup) == (3, 2)
    assert len(originals(tmp_path)) == 8


def test_same_millisecond_messages_stay_apart_and_match_again(tmp_path: Path) -> None:
    """Two different messages, and two identical ones, from one sender in one millisecond are four objects;
    the same four in a later export are duplicates; another sender in that millisecond is its own."""
    cfg = setup(tmp_path)
    same = [msg(ALICE, T0, "one"), msg(ALICE, T0, "two"), msg(ALICE, T0, "ok"), msg(ALICE, T0, "ok"), msg(ME, T0, "ok")]
    write_zip(tmp_path / "inbox" / "a.zip", Export([alice_thread(same)]).files())
    assert poll(cfg, "fbm").new == 5
    assert len(originals(tmp_path)) == 5
    write_zip(tmp_path / "inbox" / "b.zip", Export([alice_thread([*list(reversed(same)), msg(ME, T0 + 1, "later")])]).files())
    again = poll(cfg, "fbm")
    assert (again.new, again.dup) == (1, 5)


@pytest.mark.parametrize("order", ["older-first", "newer-first"])
def test_unsent_later_is_a_delete_revision_and_the_text_is_kept(tmp_path: Path, order: str) -> None:
    """A message unsent after the first export has no content in the next one: it becomes a ``delete`` revision
    of the same message (never a second message), and the text is kept whichever export is read first."""
    cfg = setup(tmp_path)
    before = [msg(ALICE, T0, "regret this"), msg(ALICE, T0 + 1, "fine")]
    after = [msg(ALICE, T0, unsent=True), msg(ALICE, T0 + 1, "fine")]
    exports = [("a.zip", before), ("b.zip", after)] if order == "older-first" else [("a.zip", after), ("b.zip", before)]
    for name, messages in exports:
        write_zip(tmp_path / "inbox" / name, Export([alice_thread(messages)]).files())
        assert poll(cfg, "fbm").status == "ok"
    stored = originals(tmp_path)
    assert sorted(d["text"] for d in stored.values()) == ["fine", "regret this"]
    [gone] = revisions(tmp_path)
    assert gone["revision"] == {"id": "unsent", "kind": "delete", "at": None} and gone["deleted"] is True
    assert gone["native_id"] == by_text(tmp_path)["regret this"]["native_id"]
    write_zip(tmp_path / "inbox" / "c.zip", Export([alice_thread([*after, msg(ME, T0 + 2, "x")])]).files())
    replay = poll(cfg, "fbm")
    assert (replay.new, replay.dup) == (1, 2)  # the delete revision again is a duplicate


def test_reactions_added_later_are_a_revision_replayed_as_a_duplicate(tmp_path: Path) -> None:
    """Reactions in a later export are a ``reactions`` revision of the message; the same set again is a duplicate,
    a changed set is one more revision; the original is never replaced."""
    cfg = setup(tmp_path)
    write_zip(tmp_path / "inbox" / "a.zip", Export([alice_thread([msg(ALICE, T0, "hi")])]).files())
    poll(cfg, "fbm")
    write_zip(tmp_path / "inbox" / "b.zip", Export([alice_thread([msg(ALICE, T0, "hi", reactions=[(ME, "❤")])])]).files())
    assert (poll(cfg, "fbm").new, len(revisions(tmp_path))) == (1, 1)
    write_zip(tmp_path / "inbox" / "c.zip", Export([alice_thread([msg(ALICE, T0, "hi", reactions=[(ME, "❤")])])], new_layout=True).files())
    assert poll(cfg, "fbm").new == 0
    write_zip(tmp_path / "inbox" / "d.zip", Export([alice_thread([msg(ALICE, T0, "hi", reactions=[(ME, "❤"), (ALICE, "😂")])])]).files())
    assert poll(cfg, "fbm").new == 1
    revs = revisions(tmp_path)
    assert len(revs) == 2 and {r["revision"]["kind"] for r in revs} == {"reactions"}
    assert {len(r["extra"]["reactions"]) for r in revs} == {1, 2}
    [original] = originals(tmp_path).values()
    assert original["text"] == "hi" and "reactions" not in original["extra"]
    assert_valid([original, *revs])  # memex.message/1, never an invented type "messenger"
    assert original["type"] == "message" and {r["type"] for r in revs} == {"reaction"}


def test_calls_and_members_joining_are_events_unsent_is_a_message_tombstone(tmp_path: Path) -> None:
    """The standard export's ``Call``, ``Subscribe`` and ``Unsubscribe`` messages are records of type ``event``, the
    rest ``message``; an unsent message's tombstone keeps ``message``; every stored record validates."""
    cfg = setup(tmp_path)
    messages = [{**msg(ALICE, T0, "The video call ended."), "type": "Call", "call_duration": 61},
                {**msg(ALICE, T0 + 1, "Alice added Bob to the group."), "type": "Subscribe"},
                {**msg(ALICE, T0 + 2, "hello"), "type": "Generic"}, msg(ALICE, T0 + 3, unsent=True)]  # fmt: skip
    write_zip(tmp_path / "inbox" / "a.zip", Export([alice_thread(messages)]).files())
    assert poll(cfg, "fbm").status == "ok"
    texts = by_text(tmp_path)
    assert [texts[t]["type"] for t in ("The video call ended.", "Alice added Bob to the group.", "hello")] == ["event", "event", "message"]
    [gone] = revisions(tmp_path)
    assert gone["type"] == "message" and gone["deleted"] is True
    assert_valid([*originals(tmp_path).values(), gone])


def test_media_present_is_stored_content_addressed_and_missing_media_is_recorded(tmp_path: Path) -> None:
    """A photo in the export is stored once at attachments/<sha256> (sent twice, stored once) with its path,
    size and type; a photo the export lacks is recorded missing; the message is stored either way."""
    cfg = setup(tmp_path)
    photo = b"\xff\xd8\xff" + os.urandom(3000)
    base = "messages/inbox/alicengstrom_1234567890/photos"
    messages = [
        msg(ALICE, T0, "look", photos=[f"{base}/1.jpg"]),
        msg(ALICE, T0 + 1, "again", photos=[f"{base}/2.jpg"]),
        msg(ALICE, T0 + 2, "gone", photos=[f"{base}/3.jpg"]),
    ]
    write_zip(
        tmp_path / "inbox" / "a.zip", Export([alice_thread(messages)], media={f"{base}/1.jpg": photo, f"{base}/2.jpg": photo}).files()
    )
    assert poll(cfg, "fbm").new == 3
    texts = by_text(tmp_path)
    [look] = texts["look"]["attachments"]
    assert look["size"] == len(photo) and look["mime_type"] == "image/jpeg" and look["id"] == f"{base}/1.jpg"
    assert texts["look"]["extra"]["media"] == [{"kind": "photos", "path": f"{base}/1.jpg"}]
    stored = file_objects(tmp_path / "state" / "store", "attachments/")
    assert list(stored.values()) == [photo] and next(iter(stored)) == f"attachments/{look['sha256']}"
    assert texts["again"]["attachments"][0]["sha256"] == look["sha256"]
    assert texts["gone"]["attachments"][0]["missing"] is True and "sha256" not in texts["gone"]["attachments"][0]


def test_no_attachments_key_keeps_media_metadata_only(tmp_path: Path) -> None:
    """``attachments = false``: media are listed (path, type) but no bytes are stored."""
    cfg = setup(tmp_path, attachments=False)
    base = "messages/inbox/alicengstrom_1234567890/photos"
    write_zip(
        tmp_path / "inbox" / "a.zip",
        Export([alice_thread([msg(ALICE, T0, "look", photos=[f"{base}/1.jpg"])])], media={f"{base}/1.jpg": b"x"}).files(),
    )
    assert poll(cfg, "fbm").new == 1
    assert not file_objects(tmp_path / "state" / "store", "attachments/")
    assert by_text(tmp_path)["look"]["attachments"][0]["size"] == 1


def test_encrypted_chat_export_and_the_same_message_in_both_exports(tmp_path: Path) -> None:
    """The encrypted-chat export (one JSON per thread, media under media/) is read; a message in both it and the
    standard export (e2ee_cutover section) is one object; its media stored."""
    cfg = setup(tmp_path)
    standard = Thread("alice_1", [ALICE, ME], [msg(ALICE, T0, "cutover 🎉"), msg(ME, T0 + 5, "before")], section="e2ee_cutover")
    write_zip(tmp_path / "inbox" / "facebook.zip", Export([standard], new_layout=True).files())
    assert poll(cfg, "fbm").new == 2
    e2ee = e2ee_files(
        {
            "Alice_1.json": (
                [ALICE, ME],
                [
                    e2ee_msg(ALICE, T0, "cutover 🎉"),
                    e2ee_msg(ALICE, T0 + 10, "encrypted 日本", reactions=[(ME, "👍")]),
                    e2ee_msg(ME, T0 + 20, media=["./media/abc.jpeg"]),
                    e2ee_msg(ME, T0 + 30, media=["Failed to download media"]),
                ],
            )
        },
        media={"media/abc.jpeg": b"jpegbytes"},
    )
    write_zip(tmp_path / "inbox" / "messages.zip", e2ee)
    result = poll(cfg, "fbm")
    assert (result.new, result.dup) == (4, 1)  # three originals and one reactions revision; the cutover message a duplicate
    texts = by_text(tmp_path)
    assert texts["encrypted 日本"]["conversation"]["id"] == texts["cutover 🎉"]["conversation"]["id"]
    media = [d for d in originals(tmp_path).values() if d["attachments"]]
    assert sorted(bool(d["attachments"][0].get("missing")) for d in media) == [False, True]
    assert file_objects(tmp_path / "state" / "store", "attachments/") and len(revisions(tmp_path)) == 1


def test_moved_renamed_or_copied_exports_cost_nothing(tmp_path: Path) -> None:
    """A processed export moved, renamed, or copied again (new mtime) is recognised by its content hash: no item
    is read again; the poll is idle."""
    cfg = setup(tmp_path)
    path = write_zip(tmp_path / "inbox" / "a.zip", Export([alice_thread([msg(ALICE, T0 + i, f"t{i}") for i in range(20)])]).files())
    assert poll(cfg, "fbm").new == 20
    os.rename(path, tmp_path / "inbox" / "renamed.zip")
    assert poll(cfg, "fbm").status == "idle"
    shutil.copy(tmp_path / "inbox" / "renamed.zip", tmp_path / "inbox" / "copy.zip")  # new mtime: hashed, recognised
    copy = poll(cfg, "fbm")
    assert (copy.status, copy.dup) == ("idle", 0)
    write_dir(tmp_path / "inbox" / "unpacked", Export([alice_thread([msg(ALICE, T0 + 1, "t1")])]).files())
    assert poll(cfg, "fbm").dup == 1
    assert poll(cfg, "fbm").status == "idle"


def test_start_now_marks_present_exports_read_and_backfill_reads_them(tmp_path: Path) -> None:
    """``start = "now"``: exports already in the inbox count as read and older messages of later exports are left
    to backfill; ``memex backfill`` reads every export present (again with ``--rewrite``)."""
    cfg_path = write_config(tmp_path, {"fbm": {"type": "messenger", "inbox": str(tmp_path / "inbox"), "settle_seconds": 0, "start": "now"}})
    (tmp_path / "inbox").mkdir()
    write_zip(tmp_path / "inbox" / "a.zip", Export([alice_thread([msg(ALICE, T0, "old")])]).files())
    cfg = memex_config.load(cfg_path)
    assert poll(cfg, "fbm").status == "idle"
    import time

    now = int(time.time() * 1000)
    write_zip(tmp_path / "inbox" / "b.zip", Export([alice_thread([msg(ALICE, T0, "old"), msg(ALICE, now + 60_000, "new")])]).files())
    assert poll(cfg, "fbm").new == 1 and set(by_text(tmp_path)) == {"new"}
    out = run_cli("backfill", "fbm", config=cfg_path)
    assert out.returncode == 0, out.stderr
    assert set(by_text(tmp_path)) == {"old", "new"}
    out = run_cli("backfill", "fbm", "--rewrite", "--restart", config=cfg_path)
    assert out.returncode == 0, out.stderr


def test_config_is_checked_without_io(tmp_path: Path) -> None:
    """``inbox`` is required; ``me`` must not be blank; unknown keys are refused; no folder is touched."""
    for table, key in (({}, "inbox"), ({"inbox": "x", "me": " "}, "me"), ({"inbox": "x", "folder": "y"}, "folder")):
        cfg = memex_config.load(write_config(tmp_path, {"fbm": {"type": "messenger", **table}}))
        with pytest.raises(ConfigError, match=key):
            make_poller(cfg.source("fbm"))
    cfg = memex_config.load(write_config(tmp_path, {"fbm": {"type": "messenger", "inbox": str(tmp_path / "nowhere")}}))
    poller = make_poller(cfg.source("fbm"))
    assert poller.watch_paths() == [tmp_path / "nowhere"]  # type: ignore[attr-defined]
    assert not (tmp_path / "nowhere").exists()


def test_a_store_from_before_the_schema_check_is_made_consistent_by_backfill_rewrite(tmp_path: Path) -> None:
    """Records an older memex stored with ``type: "messenger"`` (originals and revisions) are what ``memex verify`` reports
    as not the record schema; ``memex backfill fbm --rewrite`` replaces each of them (as ``verify --repair`` would,
    tests/messenger/test_messenger_verify.py), after which everything stored validates and verify finds the index whole."""
    cfg_path = write_config(tmp_path, {"fbm": {"type": "messenger", "inbox": str(tmp_path / "inbox"), "settle_seconds": 0}})
    (tmp_path / "inbox").mkdir()
    write_zip(
        tmp_path / "inbox" / "a.zip",
        Export([alice_thread([msg(ALICE, T0, "hi", reactions=[(ME, "❤")]), msg(ALICE, T0 + 1, "yo")])]).files(),
    )
    assert poll(memex_config.load(cfg_path), "fbm").new == 3
    store = tmp_path / "state" / "store"
    for key, body in stored_records(store).items():  # as an older memex wrote them
        old = store / f"{key}.old"
        old.write_bytes(canonical_json({**json.loads(body), "type": "messenger"}))
        os.replace(old, store / key)
    before = run_cli("verify", "fbm", "--json", config=cfg_path)
    assert before.returncode == 1, before.stderr
    report = json.loads(before.stdout)["sources"]["fbm"]
    assert report["damage"]["not_schema"] == 3 and report["inventory"] == "checked"
    out = run_cli("backfill", "fbm", "--rewrite", "--json", config=cfg_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rewritten"] == 3
    assert {d["type"] for d in assert_valid(stored_records(store))} == {"message", "reaction"}
    after = run_cli("verify", "fbm", "-q", config=cfg_path)
    assert (after.returncode, after.stdout) == (0, "")


def test_the_sent_time_is_the_text_rfc3339_writes_for_every_millisecond() -> None:
    """The renderer's sent time (date and minute cached, seconds and fractions looked up in tables) is exactly what
    ``rfc3339(datetime.fromtimestamp(ts / 1000, UTC))`` writes: with and without milliseconds, at minute and day
    boundaries, and after 2106 (where it takes that path itself)."""
    rng = random.Random(25)
    edges = [0, 1, 999, 1000, 59_999, 60_000, 86_399_999, 86_400_000, 2**32 * 1000 - 1, 2**32 * 1000 + 123]
    for ts in edges + [rng.randrange(0, 2**32 * 1000) for _ in range(20_000)]:
        assert _sent_at(ts) == rfc3339(datetime.fromtimestamp(ts / 1000, UTC)), ts
