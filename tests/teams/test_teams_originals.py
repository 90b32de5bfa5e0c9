"""Teams: never a revision without its original, when a first sync spans polls or a message changes mid-walk.

A chat of 150 messages read in pages of 25. The first sync is stopped mid-walk (SIGKILL at a held item, or
``--max-seconds`` at a hung page); before the next poll someone reacts to the oldest message and edits the
second oldest, so Graph moves their ``lastModifiedDateTime`` above everything the stopped walk read. The
resumed walk must still store them as originals, and no revision may ever be stored without its original.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memex import config as config_mod
from memex.records import message_key
from memex.runner import poll
from memex.verify import verify
from tests.conftest import ROOT, Gate, patience, run_cli
from tests.servers.graph import ME, GraphServer
from tests.teams.test_teams import CHAT_A, cursor, sign_in, stored, write_config

MESSAGES, PAGE = 150, 25


@pytest.fixture
def chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[config_mod.Config, GraphServer, list[str]]]:
    """A signed-in teams source (pages of 25, only the deadline ends a hung request) over one chat of 150 messages."""
    with GraphServer(tmp_path) as graph:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(graph.cert))
        graph.add_chat(CHAT_A, topic="Long history", members=[(ME, "Megan Bowen"), ("u-2", "Adele Vance")])
        ids = [graph.post(CHAT_A, f"history {i}") for i in range(MESSAGES)]
        cfg = config_mod.load(write_config(tmp_path, graph, page_size=PAGE, timeout=120))
        sign_in(cfg)
        yield cfg, graph, ids


def _poll_held_then_killed(tmp_path: Path, cfg: config_mod.Config, graph: GraphServer) -> None:
    """A first poll held at item 51 (two pages stored, their cursor saved), then SIGKILLed there."""
    gate = Gate(tmp_path, 2 * PAGE + 1)
    env = gate.env({**os.environ, "MEMEX_CONFIG": str(cfg.path), "REQUESTS_CA_BUNDLE": str(graph.cert)})
    proc = subprocess.Popen([sys.executable, "-m", "memex", "poll", "teams"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        gate.wait_held(proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=patience(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


def _poll_cut_at_a_hung_page(cfg: config_mod.Config, graph: GraphServer) -> None:
    """A first poll whose third page hangs until its --max-seconds deadline: it stops there, progress saved."""
    hang = threading.Event()
    fault = graph.fault(f"/me/chats/{CHAT_A}/messages", hang=hang, after=2)
    result: list[Any] = []
    walk = threading.Thread(target=lambda: result.append(poll(cfg, "teams", max_seconds=10)), daemon=True)
    walk.start()
    try:
        walk.join(patience(120))
        assert not walk.is_alive(), "the poll outlived its 10 s limit by two minutes"
    finally:
        hang.set()
        walk.join(130)
        graph.faults.remove(fault)
    assert result[0].stopped == "deadline" and result[0].exit_code == 0, result[0].error


@pytest.mark.parametrize("stop", ["sigkill", "max_seconds"])
def test_a_message_changed_after_an_interrupted_first_sync_is_stored_as_an_original(
    tmp_path: Path, chat: tuple[config_mod.Config, GraphServer, list[str]], stop: str
) -> None:
    """The resumed first sync reads by creation time, so the oldest message (reacted to) and the second oldest (edited)
    between the polls, whose modification moved above the stopped walk, are stored as originals as they are now; three
    more polls later every revision has its original and `memex verify` finds the index whole. A message the stopped walk
    did store (edited before it, so near the top) and reacted to between the polls gets its revision: the resumed walk
    re-reads it (a duplicate) but leaves it out of the cursor, so the next poll still sees the change."""
    cfg, graph, ids = chat
    graph.edit(CHAT_A, ids[2], "history 2 (edited)")  # before the first poll: read on its first page
    if stop == "sigkill":
        _poll_held_then_killed(tmp_path, cfg, graph)
    else:
        _poll_cut_at_a_hung_page(cfg, graph)
    entry = cursor(cfg)["chats"][CHAT_A]
    assert entry["t"] == 0 and entry["below"][0] > 0  # only where to resume
    first = {r["native_id"] for r in stored(tmp_path).values()}
    assert 0 < len(first) < MESSAGES and f"{CHAT_A}/{ids[0]}" not in first and f"{CHAT_A}/{ids[1]}" not in first
    assert f"{CHAT_A}/{ids[2]}" in first
    graph.react(CHAT_A, ids[0], "heart")  # both now modified after everything the stopped walk read
    graph.edit(CHAT_A, ids[1], "history 1 (edited)")
    graph.react(CHAT_A, ids[2], "like")

    resumed = poll(cfg, "teams")
    assert resumed.exit_code == 0 and "below" not in cursor(cfg)["chats"][CHAT_A], resumed.error
    originals = {r["native_id"]: r for r in stored(tmp_path).values()}
    assert originals.keys() == {f"{CHAT_A}/{m}" for m in ids}  # the completed first sync holds every message
    for _ in range(3):
        assert poll(cfg, "teams").exit_code == 0
    originals = {r["native_id"]: r for r in stored(tmp_path).values()}
    assert originals.keys() == {f"{CHAT_A}/{m}" for m in ids}
    assert [r["reactionType"] for r in originals[f"{CHAT_A}/{ids[0]}"]["extra"]["reactions"]] == ["heart"]
    assert originals[f"{CHAT_A}/{ids[1]}"]["text"] == "history 1 (edited)"
    assert originals[f"{CHAT_A}/{ids[2]}"]["text"] == "history 2 (edited)" and "reactions" not in originals[f"{CHAT_A}/{ids[2]}"]["extra"]
    revisions = stored(tmp_path, "revisions/teams/").items()
    assert any(r["native_id"] == f"{CHAT_A}/{ids[2]}" and r["revision"]["kind"] == "reactions" for _, r in revisions)
    store = tmp_path / "store"
    for key, rev in revisions:
        assert (store / message_key("teams", rev["native_id"])).is_file(), f"{key} has no original"
    report = verify(cfg, ["teams"])
    assert report.whole and report.sources["teams"].records == MESSAGES, report.to_json()


def test_a_message_changed_while_the_first_walk_is_between_pages_gets_its_original(
    tmp_path: Path, chat: tuple[config_mod.Config, GraphServer, list[str]]
) -> None:
    """The oldest message reacted to while the first walk holds its second page jumps above the walk, which never meets
    it; the next poll sees it as a change of a stored message (created long before the cursor), and the core stores
    the message as it is now as the original before the revision: never a revision without its original."""
    cfg, graph, ids = chat
    gate = Gate(tmp_path, PAGE + 1)  # page 2 fetched and held; pages 3..6 (the oldest message among them) not yet
    env = gate.env({**os.environ, "MEMEX_CONFIG": str(cfg.path), "REQUESTS_CA_BUNDLE": str(graph.cert)})
    proc = subprocess.Popen([sys.executable, "-m", "memex", "poll", "teams"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        gate.wait_held(proc)
        graph.react(CHAT_A, ids[0], "laugh")
        gate.open()
        _, err = proc.communicate(timeout=patience(120))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "below" not in cursor(cfg)["chats"][CHAT_A], err
    assert len(stored(tmp_path)) == MESSAGES - 1  # the walk never met the message that moved above it
    again = poll(cfg, "teams")
    assert again.exit_code == 0, again.error
    (rev,) = stored(tmp_path, "revisions/teams/").values()
    assert rev["native_id"] == f"{CHAT_A}/{ids[0]}" and rev["revision"]["kind"] == "reactions"
    original = stored(tmp_path)[message_key("teams", rev["native_id"])]
    assert "revision" not in original and [r["reactionType"] for r in original["extra"]["reactions"]] == ["laugh"]
    assert len(stored(tmp_path)) == MESSAGES
    assert verify(cfg, ["teams"]).whole


def test_verify_finds_a_revision_without_its_original_and_repair_or_the_next_change_heals_it(
    tmp_path: Path, chat: tuple[config_mod.Config, GraphServer, list[str]]
) -> None:
    """Damage left by an earlier memex (two edited messages whose originals are missing): `memex verify` reports each
    revision without its original (exit 1); a poll with no change leaves them; the next change of one message makes the
    poll store its original (the guard); `memex verify --repair` stores the other's from its earliest revision (Teams
    revisions are whole messages), and the index is whole again (exit 0). Nothing is deleted."""
    cfg, graph, ids = chat
    assert poll(cfg, "teams").new == MESSAGES
    graph.edit(CHAT_A, ids[0], "history 0 (edited)")
    graph.edit(CHAT_A, ids[1], "history 1 (edited)")
    assert poll(cfg, "teams").new == 2
    store = tmp_path / "store"
    for mid in ids[:2]:
        (store / message_key("teams", f"{CHAT_A}/{mid}")).unlink()
    env = {"REQUESTS_CA_BUNDLE": str(graph.cert)}
    found = run_cli("verify", "--json", "teams", config=cfg.path, env=env)
    assert found.returncode == 1, found.stderr
    assert json.loads(found.stdout)["sources"]["teams"]["damage"]["orphan_revision"] == 2
    assert poll(cfg, "teams").new == 0 and not verify(cfg, ["teams"]).whole  # nothing changed: nothing re-read
    graph.react(CHAT_A, ids[0], "like")
    assert poll(cfg, "teams").new == 1  # the reaction's revision, its missing original stored first
    assert stored(tmp_path)[message_key("teams", f"{CHAT_A}/{ids[0]}")]["extra"]["reactions"][0]["reactionType"] == "like"
    revisions_before = stored(tmp_path, "revisions/teams/")
    fixed = run_cli("verify", "--repair", "--json", "teams", config=cfg.path, env=env)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert json.loads(fixed.stdout)["sources"]["teams"]["repaired"] == {"originals from revisions": 1}
    original = stored(tmp_path)[message_key("teams", f"{CHAT_A}/{ids[1]}")]
    (rev,) = (r for r in revisions_before.values() if r["native_id"] == f"{CHAT_A}/{ids[1]}")
    assert original == {k: v for k, v in rev.items() if k != "revision"} and original["text"] == "history 1 (edited)"
    assert stored(tmp_path, "revisions/teams/") == revisions_before and len(stored(tmp_path)) == MESSAGES
