"""Messenger exports that go wrong: a corrupt thread file, an HTML or Instagram export, a zip still being written,
and memex poll killed with SIGKILL in the middle of a large export."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

from memex import config as memex_config
from memex.runner import COMMIT_ITEMS, poll
from tests.conftest import ROOT, Gate, file_objects, read_log, run_cli, wait_until, write_config
from tests.messenger.messenger_fixtures import ALICE, ME, T0, Export, Thread, msg, write_zip

WRITER = """
import sys, time, zipfile
sys.path.insert(0, sys.argv[3])
from tests.messenger.messenger_fixtures import ALICE, ME, T0, Export, Thread, msg
files = Export([Thread(f"t_{k}", [ALICE, ME, f"P{k}"], [msg(ALICE, T0 + k * 100 + i, f"w{k}.{i}") for i in range(5)])
                for k in range(int(sys.argv[2]))]).files()
with open(sys.argv[1], "wb") as f, zipfile.ZipFile(f, "w") as zf:
    for name, body in files.items():
        zf.writestr(name, body)
        f.flush()
        time.sleep(0.05)
"""


def setup(tmp_path: Path, settle: int = 0) -> Path:
    """A config file with one messenger source ``fbm`` reading ``tmp_path/inbox``."""
    (tmp_path / "inbox").mkdir(exist_ok=True)
    return write_config(tmp_path, {"fbm": {"type": "messenger", "inbox": str(tmp_path / "inbox"), "settle_seconds": settle, "me": ME}})


def texts(tmp_path: Path) -> list[str]:
    """Texts of every stored original, sorted (duplicates would show twice)."""
    objs = file_objects(tmp_path / "state" / "store", "messages/")
    return sorted(json.loads(b)["text"] for b in objs.values())


def test_a_corrupt_thread_file_is_quarantined_and_nothing_else_is_lost(tmp_path: Path) -> None:
    """A thread's message_2.json cut short is one quarantined record with its raw bytes and a log line naming the
    file; its message_1.json, the other threads and a malformed message's neighbours are all stored."""
    cfg = memex_config.load(setup(tmp_path))
    big = Thread("alice_1", [ALICE, ME], [msg(ALICE, T0 + i, f"a{i}") for i in range(6)], per_file=3)
    files = Export([big, Thread("bob_2", ["Bob", ME], [msg("Bob", T0, "b0")])]).files()
    broken = files["messages/inbox/alice_1/message_2.json"][:200]
    files["messages/inbox/alice_1/message_2.json"] = broken
    doc = json.loads(files["messages/inbox/bob_2/message_1.json"])
    doc["messages"].append({"sender_name": "Bob", "content": "no timestamp"})
    files["messages/inbox/bob_2/message_1.json"] = json.dumps(doc).encode()
    write_zip(tmp_path / "inbox" / "export.zip", files)
    result = poll(cfg, "fbm")
    assert (result.status, result.new, result.quarantined) == ("ok", 4, 2)
    assert texts(tmp_path) == ["a3", "a4", "a5", "b0"]
    quarantine = file_objects(tmp_path / "state" / "store", "quarantine/")
    assert broken in quarantine.values()
    lines = [e for e in read_log(tmp_path / "state", "fbm") if e.get("event") == "record.quarantined"]
    assert any("message_2.json in export export.zip is not valid JSON" in e["reason"] for e in lines)
    assert any("message 1 of messages/inbox/bob_2/message_1.json" in e["reason"] for e in lines)
    assert all("no timestamp" not in json.dumps(e) for e in lines)


def test_html_and_instagram_exports_are_one_clear_error_and_block_nothing(tmp_path: Path) -> None:
    """An HTML export and an Instagram export each give an error naming the file and saying to download JSON
    (exit 1), every poll until removed; a good export beside them is read all the same."""
    cfg = setup(tmp_path)
    write_zip(tmp_path / "inbox" / "html.zip", {"messages/inbox/alice_1/message_1.html": b"<html>hi</html>", "index.html": b"<html/>"})
    write_zip(tmp_path / "inbox" / "good.zip", Export([Thread("alice_1", [ALICE, ME], [msg(ALICE, T0, "fine")])]).files())
    out = run_cli("poll", "fbm", config=cfg)
    assert out.returncode == 1
    assert "html.zip: an HTML export" in out.stderr and "Format: JSON" in out.stderr and "Traceback" not in out.stderr
    assert texts(tmp_path) == ["fine"]
    assert run_cli("poll", "fbm", config=cfg).returncode == 1
    (tmp_path / "inbox" / "html.zip").unlink()
    insta = {"your_instagram_activity/messages/inbox/x_1/message_1.json": json.dumps({"participants": [], "messages": []}).encode()}
    write_zip(tmp_path / "inbox" / "instagram-me.zip", insta)
    out = run_cli("poll", "fbm", config=cfg)
    assert out.returncode == 1 and "instagram-me.zip: an Instagram export" in out.stderr
    (tmp_path / "inbox" / "instagram-me.zip").unlink()
    assert run_cli("poll", "fbm", config=cfg).returncode == 0


def test_a_zip_still_being_written_is_left_until_complete(tmp_path: Path) -> None:
    """A separate process writes a zip into the inbox slowly; polls meanwhile read nothing and report no error;
    once it has settled, the whole export is read."""
    cfg = memex_config.load(setup(tmp_path, settle=2))
    target = tmp_path / "inbox" / "facebook-downloading.zip"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(target), "40", str(ROOT)])
    try:
        wait_until(lambda: target.exists() and target.stat().st_size > 0, 30, "the writer to start")
        polls = 0
        while writer.poll() is None:
            result = poll(cfg, "fbm")
            assert (result.status, result.new, result.error) == ("idle", 0, None)
            polls += 1
        assert polls >= 1 and writer.wait(30) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(10)
    wait_until(lambda: poll(cfg, "fbm").new == 200, 30, "the settled export to be read")
    assert len(texts(tmp_path)) == 200


def test_kill_9_in_a_large_export_then_a_rerun_stores_every_message_exactly_once(tmp_path: Path) -> None:
    """memex poll killed with SIGKILL at random moments while reading a large export; the next polls resume
    inside it (re-putting at most one group commit), and in the end every message is stored once.

    Three polls are held (a test hold) at a random message among their first 800, so each is provably mid-export when
    it is killed, whatever the machine's speed; a fourth is let go and killed a random moment later."""
    cfg = setup(tmp_path)
    threads = [
        Thread(f"p{k}_{k}", [f"P{k}", ME], [msg(f"P{k}", T0 + i * 10, f"{k}.{i}") for i in range(300)], per_file=100) for k in range(20)
    ]
    write_zip(tmp_path / "inbox" / "large.zip", Export(threads).files())
    rng = random.Random(7)
    argv = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "fbm"]
    kills = 0
    for round_ in range(4):  # at most 4 x 800 of the 6,000 messages are passed before the clean poll
        gate = Gate(tmp_path, rng.randint(1, 800), name=f"gate{round_}")
        proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL, cwd=ROOT, env=gate.env())
        gate.wait_held(proc)
        if round_ == 3:
            gate.open()
            try:
                proc.wait(timeout=rng.uniform(0.0, 0.3))
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(30)
    assert kills >= 3
    out = run_cli("poll", "fbm", config=cfg)
    assert out.returncode == 0, out.stderr
    last = [e for e in read_log(tmp_path / "state", "fbm") if e.get("event") == "poll"][-1]
    assert last["dup"] <= COMMIT_ITEMS  # resumed where it stood: at most one group commit stored but not yet under the cursor
    assert texts(tmp_path) == sorted(f"{k}.{i}" for k in range(20) for i in range(300))
    assert run_cli("poll", "fbm", config=cfg).returncode == 0
    assert [e for e in read_log(tmp_path / "state", "fbm") if e.get("event") == "poll"][-1]["status"] == "idle"


def test_an_html_export_and_a_cut_short_zip_are_both_named_with_what_to_do(tmp_path: Path) -> None:
    """With an HTML export and a cut-short zip in the inbox together, the one error line names each of them with its
    own advice (download the JSON format; wait for the copy or download again), not one of them and a count."""
    cfg = setup(tmp_path)
    write_zip(tmp_path / "inbox" / "html.zip", {"messages/inbox/alice_1/message_1.html": b"<html>hi</html>", "index.html": b"<html/>"})
    whole = write_zip(tmp_path / "inbox" / "whole.zip", Export([Thread("alice_1", [ALICE, ME], [msg(ALICE, T0, "fine")])]).files())
    cut = tmp_path / "inbox" / "cut.zip"
    cut.write_bytes(whole.read_bytes()[:-40])  # the end of central directory is missing: a copy cut short
    whole.unlink()
    out = run_cli("poll", "fbm", config=cfg)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    (line,) = [ln for ln in out.stderr.splitlines() if "html.zip" in ln]
    assert "2 exports in the inbox cannot be read" in line
    assert "cut.zip: not a complete zip file" in line and "download it again" in line
    assert "html.zip: an HTML export" in line and "Format: JSON" in line


def test_sigterm_inside_a_batch_saves_the_cursor_right_after_the_last_stored_message(tmp_path: Path) -> None:
    """A Messenger batch makes its items' cursors only where the runner stops (``Batch.cursor_at``): a poll stopped by
    SIGTERM at the 700th message (inside the second batch of 500 and inside the second thread) saves the cursor just
    past the last message it stored, so the next poll stores the other 500 and re-reads none (no duplicate, nothing lost).

    The poll is held at that message (a test hold) when the signal is sent, whatever the machine's speed; let go by the
    stop, the file store stores the held message, and the runner stops before the next."""
    cfg = setup(tmp_path)
    threads = [
        Thread(f"p{k}_{k}", [f"P{k}", ME], [msg(f"P{k}", T0 + i * 10, f"{k}.{i}") for i in range(400)], per_file=100) for k in range(3)
    ]
    write_zip(tmp_path / "inbox" / "big.zip", Export(threads).files())
    gate = Gate(tmp_path, 700)
    argv = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "fbm"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=gate.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    gate.wait_held(proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    first = [e for e in read_log(tmp_path / "state", "fbm") if e.get("event") == "poll"][-1]
    assert first["stopped"] == "signal" and first["new"] == 700 and first["positions_after"]["items"] == 700
    out = run_cli("poll", "fbm", config=cfg)
    assert out.returncode == 0, out.stderr
    second = [e for e in read_log(tmp_path / "state", "fbm") if e.get("event") == "poll"][-1]
    assert second["new"] == 500 and second["dup"] == 0
    assert texts(tmp_path) == sorted(f"{k}.{i}" for k in range(3) for i in range(400))
