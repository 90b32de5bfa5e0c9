"""``memex verify`` on a Messenger source, with real export zips and folders: the messages of the exports the cursor
has read are compared with the index, --repair renders again from the export what is missing or damaged, an export
gone from the inbox is reported (not an error), and the export being read is compared only up to the cursor."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from memex import config as memex_config
from memex.records import message_key
from memex.registry import make_poller
from memex.runner import poll
from memex.state.backend import cursor_store
from tests.conftest import file_objects, run_cli, write_config
from tests.messenger.messenger_fixtures import ALICE, ME, T0, Export, Thread, msg, write_dir, write_zip

BOB = "Bob Ørsted"


def setup(tmp_path: Path) -> tuple[Path, memex_config.Config]:
    """A config with one messenger source ``fbm`` reading ``tmp_path/inbox`` (settle 0): its path, and it loaded."""
    inbox = tmp_path / "inbox"
    inbox.mkdir(exist_ok=True)
    path = write_config(tmp_path, {"fbm": {"type": "messenger", "inbox": str(inbox), "settle_seconds": 0, "me": ME}})
    return path, memex_config.load(path)


def verify_json(cfg_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``memex verify fbm --json ARGS`` as a command: its exit code and the source's part of the report."""
    out = run_cli("verify", "fbm", "--json", *args, config=cfg_path)
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, json.loads(out.stdout)["sources"]["fbm"]


def native_ids(cfg: memex_config.Config) -> dict[str, str]:
    """text -> native ID of every stored original."""
    objs = file_objects(cfg.state_dir / "store", "messages/")
    return {d["text"]: d["native_id"] for d in (json.loads(b) for b in objs.values())}


def listed(cfg: memex_config.Config, cursor: Any = None) -> list[Any]:
    """What the poller's inventory yields for ``cursor`` (default: the saved one)."""
    poller = make_poller(cfg.source("fbm"))
    try:
        return list(poller.inventory(cursor if cursor is not None else cursor_store(cfg).cursor("fbm")))  # type: ignore[attr-defined]
    finally:
        poller.close()


def test_a_lost_message_is_found_and_repair_renders_it_again_from_the_export(tmp_path: Path) -> None:
    """Two overlapping exports (a zip and a folder): each message is listed once, by its original (an unsent
    message is only a revision, so it is not looked for). A lost record is reported missing (exit 1) with the
    export and thread it is in; --repair stores it again exactly as the poll did, and replaces a damaged original
    and a damaged reactions revision; nothing is deleted, and the next verify exits 0."""
    cfg_path, cfg = setup(tmp_path)
    older = [msg(ALICE, T0, "hi", reactions=[(ME, "❤")]), msg(ME, T0 + 1000, "hello"), msg(ALICE, T0 + 2000, "gone soon")]
    newer = [*older[:2], msg(ALICE, T0 + 3000, "later"), msg(ALICE, T0 + 4000, "more")]
    write_zip(tmp_path / "inbox" / "a.zip", Export([Thread("alice_1", [ALICE, ME], older)]).files())
    assert poll(cfg, "fbm").new == 4
    write_dir(tmp_path / "inbox" / "b", Export([Thread("alice_1", [ALICE, ME], newer)], new_layout=True).files())
    assert poll(cfg, "fbm").status == "ok"
    ids = native_ids(cfg)
    assert sorted(e.native_id for e in listed(cfg)) == sorted(ids.values())
    code, report = verify_json(cfg_path)
    assert (code, report["inventory"], report["listed"], report["unchecked"]) == (0, "checked", len(ids), [])

    store = cfg.state_dir / "store"
    before = set(file_objects(store, ""))
    lost = store / message_key("fbm", ids["later"])
    sound = lost.read_bytes()
    lost.unlink()
    (store / message_key("fbm", ids["hello"])).write_bytes(b"")
    reactions = next(store.glob("revisions/fbm/*/*.json"))
    reactions_sound = reactions.read_bytes()
    reactions.write_bytes(b"{")
    code, report = verify_json(cfg_path)
    assert code == 1 and report["damage"]["missing_from_source"] == 1
    assert report["examples"]["missing_from_source"][0] == {
        "native_id": ids["later"],
        "ref": report["examples"]["missing_from_source"][0]["ref"],
    }
    assert report["examples"]["missing_from_source"][0]["ref"].startswith("b!your_facebook_activity/messages/inbox/alice_1#")

    code, report = verify_json(cfg_path, "--repair")
    assert code == 0 and report["repaired"] == {"restored": 1, "replaced": 2}, report
    assert lost.read_bytes() == sound and reactions.read_bytes() == reactions_sound
    assert json.loads((store / message_key("fbm", ids["hello"])).read_bytes())["text"] == "hello"
    assert set(file_objects(store, "")) >= before
    assert verify_json(cfg_path)[0] == 0


def test_an_unsent_message_is_not_looked_for_as_an_original(tmp_path: Path) -> None:
    """An export whose message was unsent before memex saw it stores only a ``delete`` revision: the inventory
    lists the messages with an original and not that one (it would be "missing" forever)."""
    _, cfg = setup(tmp_path)
    write_zip(
        tmp_path / "inbox" / "a.zip",
        Export([Thread("alice_1", [ALICE, ME], [msg(ALICE, T0, unsent=True), msg(ALICE, T0 + 1, "kept")])]).files(),
    )
    assert poll(cfg, "fbm").status == "ok"
    assert [e.native_id for e in listed(cfg)] == list(native_ids(cfg).values())


def test_an_export_gone_from_the_inbox_is_reported_and_a_moved_one_still_compared(tmp_path: Path) -> None:
    """Of two exports read, one is deleted from the inbox and the other copied under a new name (its signature
    changes, its content hash does not): the gone one is reported by what the cursor knows of it, "cannot be
    checked", not an error (exit 0); the copied one is found by content and its messages are still compared."""
    cfg_path, cfg = setup(tmp_path)
    write_zip(tmp_path / "inbox" / "a.zip", Export([Thread("alice_1", [ALICE, ME], [msg(ALICE, T0, "from a")])]).files())
    assert poll(cfg, "fbm").new == 1
    write_zip(tmp_path / "inbox" / "b.zip", Export([Thread("bob_1", [BOB, ME], [msg(BOB, T0, "from b")])]).files())
    assert poll(cfg, "fbm").new == 1
    (tmp_path / "inbox" / "a.zip").unlink()
    shutil.copy(tmp_path / "inbox" / "b.zip", tmp_path / "inbox" / "b-copy.zip")
    os.utime(tmp_path / "inbox" / "b-copy.zip", ns=(10**18, 10**18))
    (tmp_path / "inbox" / "b.zip").unlink()
    (cfg.state_dir / "store" / message_key("fbm", native_ids(cfg)["from b"])).unlink()
    code, report = verify_json(cfg_path)
    assert code == 1 and report["listed"] == 1 and report["damage"]["missing_from_source"] == 1
    assert report["examples"]["missing_from_source"][0]["ref"].startswith("b-copy.zip!")
    assert len(report["unchecked"]) == 1
    gone = report["unchecked"][0]
    assert "no longer in" in gone and str(tmp_path / "inbox") in gone and "cannot be checked" in gone and "a zip of" in gone
    out = run_cli("verify", "fbm", "--repair", config=cfg_path)
    assert out.returncode == 0 and "not checked: export" in out.stdout, out.stdout


def test_the_export_being_read_is_compared_up_to_the_cursor_only(tmp_path: Path) -> None:
    """A poll stopped inside an export has stored the items of its thread up to ``at.n``: those are compared, the
    rest of the export (not stored yet) is not expected, so verify finds the index whole."""
    cfg_path, cfg = setup(tmp_path)
    messages = [msg(ALICE, T0 + i * 1000, f"m{i}") for i in range(6)]
    write_zip(
        tmp_path / "inbox" / "a.zip",
        Export([Thread("alice_1", [ALICE, ME], messages), Thread("zed_1", [BOB, ME], [msg(BOB, T0, "z")])]).files(),
    )
    assert poll(cfg, "fbm").new == 7
    ids = native_ids(cfg)
    cursor = cursor_store(cfg).cursor("fbm")
    [[export_hash, _]] = cursor["done"]
    unit = "messages/inbox/alice_1"
    stopped = {"done": [], "exports": 0, "items": 2, "at": {"export": export_hash, "unit": unit, "n": 2}}
    store = cfg.state_dir / "store"
    for text in ("m3", "m2", "m1", "m0", "z"):  # newest first: the two items stored are m5 and m4
        (store / message_key("fbm", ids[text])).unlink()
    cursor_store(cfg).set_cursor("fbm", stopped, reason="a poll stopped inside the export")
    assert sorted(e.native_id for e in listed(cfg)) == sorted([ids["m5"], ids["m4"]])
    code, report = verify_json(cfg_path)
    assert (code, report["listed"]) == (0, 2), report
