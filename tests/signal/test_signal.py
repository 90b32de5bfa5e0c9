"""Signal through signal-cli (pollers/signal/cli.py), driven by a stand-in executable that speaks signal-cli's JSON."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memex.records import encode_id, message_key, revision_key
from memex.state.spool import Spool
from tests.conftest import ROOT, Gate, assert_valid, file_objects, need_strace, need_syncfs, read_log, run_cli, wait_until, write_config
from tests.signal import signal_standin as sc

T0 = 1744235749734


def setup(tmp_path: Path, **keys: Any) -> tuple[Path, Path]:
    """A config with one signal source whose executable is the stand-in; returns (config, stand-in folder)."""
    folder = tmp_path / "sc"
    exe = sc.install(folder)
    table = {"type": "signal", "account": sc.ACCOUNT, "executable": str(exe), "config_dir": str(tmp_path / "scdata"), "receive_timeout": 1}
    table.update(keys)
    return write_config(tmp_path, {"sig": table}), folder


def stored(tmp_path: Path, prefix: str = "messages/") -> dict[str, dict[str, Any]]:
    """The store's JSON objects under ``prefix``, decoded."""
    return {k: json.loads(v) for k, v in file_objects(tmp_path / "state" / "store", prefix).items() if k.endswith(".json")}


def last_poll(tmp_path: Path) -> dict[str, Any]:
    """The newest poll line of the source."""
    return [e for e in read_log(tmp_path / "state", "sig") if e.get("event") == "poll"][-1]


def test_each_kind_of_envelope_becomes_its_record(tmp_path: Path) -> None:
    """Data, group, quote, sync-sent, edit, remote delete and reaction envelopes become originals and revisions of
    their target under the native ID <ACI>:<sent ms>; receipts and typing are skipped and counted."""
    cfg, folder = setup(tmp_path)
    group = {"groupId": sc.GROUP, "groupName": "Climbing", "revision": 3, "type": "DELIVER"}
    quote = {"id": T0, "author": sc.ALICE, "authorNumber": None, "authorUuid": sc.ALICE, "text": "hi", "attachments": []}
    sent = {"destination": sc.ALICE, "destinationNumber": None, "destinationUuid": sc.ALICE, **sc.data(T0 + 2, "from my phone")}
    reaction = {"emoji": "👍", "targetAuthor": sc.ALICE, "targetAuthorNumber": None, "targetAuthorUuid": sc.ALICE,
                "targetSentTimestamp": T0, "isRemove": False}  # fmt: skip
    sc.queue(
        folder,
        sc.message(sc.ALICE, T0, "hi there"),
        sc.message(sc.ALICE, T0 + 1, "in the group", groupInfo=group, quote=quote),
        sc.envelope(sc.ME, T0 + 2, syncMessage={"sentMessage": sent}),
        sc.envelope(sc.ALICE, T0 + 3, editMessage={"targetSentTimestamp": T0, "dataMessage": sc.data(T0 + 3, "hi there!")}),
        sc.envelope(sc.ALICE, T0 + 4, dataMessage=sc.data(T0 + 4, None, reaction=reaction)),
        sc.envelope(sc.ALICE, T0 + 5, dataMessage=sc.data(T0 + 5, None, remoteDelete={"timestamp": T0 + 1})),
        sc.envelope(
            sc.ALICE, T0 + 6, receiptMessage={"when": T0 + 6, "isDelivery": True, "isRead": False, "isViewed": False, "timestamps": [T0]}
        ),
        sc.envelope(sc.ALICE, T0 + 7, typingMessage={"action": "STARTED", "timestamp": T0 + 7}),
    )
    out = run_cli("poll", "sig", config=cfg)
    assert out.returncode == 0, out.stderr
    objects = stored(tmp_path)
    first = objects[message_key("sig", f"{sc.ALICE}:{T0}")]
    assert first["text"] == "hi there" and first["sender"] == {"id": sc.ALICE, "name": "Alice", "is_me": False}
    assert first["sent_at"] == "2025-04-09T21:55:49.734000Z" and first["conversation"]["id"] == sc.ALICE
    grouped = objects[message_key("sig", f"{sc.ALICE}:{T0 + 1}")]
    assert grouped["conversation"]["id"] == sc.GROUP and grouped["conversation"]["name"] == "Climbing"
    assert grouped["reply_to"] == f"{sc.ALICE}:{T0}"
    mine = objects[message_key("sig", f"{sc.ME}:{T0 + 2}")]
    assert mine["sender"]["is_me"] and mine["conversation"]["id"] == sc.ALICE and mine["text"] == "from my phone"
    revisions = stored(tmp_path, "revisions/")
    edit = revisions[revision_key("sig", f"{sc.ALICE}:{T0}", f"edit:{T0 + 3}")]
    assert edit["text"] == "hi there!" and edit["revision"]["kind"] == "edit"
    assert first["text"] == "hi there"  # the original is never overwritten
    react = revisions[revision_key("sig", f"{sc.ALICE}:{T0}", f"reaction:{sc.ALICE}:{T0 + 4}")]
    assert react["extra"]["reaction"] == {"emoji": "👍", "by": sc.ALICE, "remove": False}
    tomb = revisions[revision_key("sig", f"{sc.ALICE}:{T0 + 1}", f"delete:{T0 + 5}")]
    assert tomb["deleted"] is True and tomb["revision"]["kind"] == "delete"
    assert len(objects) == 3 and len(revisions) == 3
    assert_valid({**objects, **revisions})  # memex.message/1, never an invented type "signal"
    assert {r["type"] for r in objects.values()} == {"message"} and (edit["type"], tomb["type"], react["type"]) == (
        "message",
        "message",
        "reaction",
    )
    line = last_poll(tmp_path)
    assert line["new"] == 6 and line["skipped"] == {"receipt": 1, "typing": 1}
    assert line["spool_count"] == 0 and line["receive"] == "ok"
    argv = (folder / "argv.log").read_text().split()
    assert argv == ["--config", str(tmp_path / "scdata"), "-a", sc.ACCOUNT, "-o", "json", "receive", "-t", "1"]


def test_a_group_is_named_by_signal_clis_group_list_never_by_its_sender(tmp_path: Path) -> None:
    """groupInfo without groupName (signal-cli 0.13.x): Alice's and Bob's messages to one group are both in a
    conversation named by `listGroups`, asked once per poll and only for a new group (remembered across polls); a group
    listGroups does not know is named by its ID; being added to a group (DELIVER, groupInfo, no body) is skipped."""
    cfg, folder = setup(tmp_path)
    sc.groups(folder, {sc.GROUP: "Climbing"})
    in_group = {"groupId": sc.GROUP, "revision": 3, "type": "DELIVER"}
    bob = sc.message(sc.BOB, T0 + 1, "me too", groupInfo=in_group)
    bob["envelope"]["sourceName"] = "Bob"
    sc.queue(
        folder,
        sc.envelope(
            sc.ALICE, T0 - 1, dataMessage=sc.data(T0 - 1, None, groupInfo={"groupId": sc.GROUP2, "revision": 1, "type": "DELIVER"})
        ),
        sc.message(sc.ALICE, T0, "hi all", groupInfo=in_group),
        bob,
        sc.message(sc.ALICE, T0 + 2, "elsewhere", groupInfo={"groupId": sc.GROUP2, "revision": 1, "type": "DELIVER"}),
    )
    assert run_cli("poll", "sig", config=cfg).returncode == 0
    sc.queue(folder, sc.message(sc.BOB, T0 + 3, "later", groupInfo=in_group))
    out = run_cli("poll", "sig", config=cfg)
    assert out.returncode == 0 and out.stderr == ""
    objects = {m["native_id"]: m["conversation"] for m in stored(tmp_path).values()}
    assert objects == {
        f"{sc.ALICE}:{T0}": {"id": sc.GROUP, "name": "Climbing", "participants": []},
        f"{sc.BOB}:{T0 + 1}": {"id": sc.GROUP, "name": "Climbing", "participants": []},
        f"{sc.ALICE}:{T0 + 2}": {"id": sc.GROUP2, "name": sc.GROUP2, "participants": []},
        f"{sc.BOB}:{T0 + 3}": {"id": sc.GROUP, "name": "Climbing", "participants": []},
    }
    polls = [e for e in read_log(tmp_path / "state", "sig") if e.get("event") == "poll"]
    assert polls[0]["skipped"] == {"group_update": 1} and polls[0]["new"] == 3
    calls = [line.split()[-1] for line in (folder / "argv.log").read_text().splitlines()]
    assert calls == ["1", "listGroups", "1"]  # receive, listGroups, receive: the second poll knew the group


def test_a_failed_group_list_names_the_group_by_its_id_with_one_warning(tmp_path: Path) -> None:
    """listGroups printing something that is not its JSON list: the message is stored under the group's ID as its name,
    one warning says so (no message text in it), the poll succeeds."""
    cfg, folder = setup(tmp_path)
    (folder / "groups.json").write_text("Error: something went wrong")
    sc.queue(folder, sc.message(sc.ALICE, T0, "hi all", groupInfo={"groupId": sc.GROUP, "revision": 3, "type": "DELIVER"}))
    out = run_cli("poll", "sig", config=cfg)
    assert out.returncode == 0
    (record,) = stored(tmp_path).values()
    assert record["conversation"] == {"id": sc.GROUP, "name": sc.GROUP, "participants": []}
    warned = [e["reason"] for e in read_log(tmp_path / "state", "sig") if e.get("event") == "source.warning"]
    assert len(warned) == 1 and "listGroups failed" in warned[0] and "hi all" not in warned[0]


def test_exceptions_and_broken_lines_are_quarantined_with_their_bytes(tmp_path: Path) -> None:
    """An exception envelope and a line that is not JSON are kept in quarantine with the raw line; the rest is stored."""
    cfg, folder = setup(tmp_path)
    broken = b'{"envelope": {"sourceUuid": "x", "timestamp": 1'
    exc = {"exception": {"message": "org.signal.libsignal.protocol.InvalidMessageException: invalid", "type": "ProtocolInvalidMessageException"},
           **sc.envelope(sc.ALICE, T0)}  # fmt: skip
    sc.queue(folder, exc, broken, sc.message(sc.ALICE, T0 + 1, "fine"))
    out = run_cli("poll", "sig", config=cfg)
    assert out.returncode == 0, out.stderr
    raws = file_objects(tmp_path / "state" / "store", "quarantine/")
    assert sorted(v for k, v in raws.items() if k.endswith(".raw")) == sorted([broken, sc.acked(folder)[0]])
    assert list(stored(tmp_path)) == [message_key("sig", f"{sc.ALICE}:{T0 + 1}")]
    assert last_poll(tmp_path)["quarantined"] == 2
    assert "invalid" not in out.stderr


def test_attachments_are_stored_content_addressed_from_signal_clis_folder(tmp_path: Path) -> None:
    """An attachment signal-cli downloaded to <config_dir>/attachments/<id> is stored as attachments/<sha256>; one gone is marked missing."""
    cfg, folder = setup(tmp_path)
    (tmp_path / "scdata" / "attachments").mkdir(parents=True)
    (tmp_path / "scdata" / "attachments" / "e3GxZ1pV.jpg").write_bytes(b"\xff\xd8jpeg bytes")
    atts = [{"contentType": "image/jpeg", "filename": "cat.jpg", "id": "e3GxZ1pV.jpg", "size": 12},
            {"contentType": "image/png", "filename": None, "id": "gone.png", "size": 5}]  # fmt: skip
    sc.queue(folder, sc.message(sc.ALICE, T0, "look", attachments=atts))
    assert run_cli("poll", "sig", config=cfg).returncode == 0
    record = stored(tmp_path)[message_key("sig", f"{sc.ALICE}:{T0}")]
    import hashlib

    sha = hashlib.sha256(b"\xff\xd8jpeg bytes").hexdigest()
    assert record["attachments"][0]["sha256"] == sha and record["attachments"][1]["missing"] is True
    assert_valid([record])
    assert (tmp_path / "state" / "store" / "attachments" / sha).read_bytes() == b"\xff\xd8jpeg bytes"


def test_a_running_daemon_ends_the_receive_at_once_as_busy(tmp_path: Path) -> None:
    """signal-cli that logs "Config file is in use by another instance, waiting…" and blocks (a running signal-cli
    daemon holds the account) is stopped as soon as it says so: the poll ends long before its receive timeout and its
    time limit, quietly (exit 0, nothing on stderr, no warning in the log, `receive: busy` in the poll line), the
    stand-in is gone, and the spool is still drained. The older form (the same words, then exit) is busy too."""
    cfg, folder = setup(tmp_path, receive_timeout=600)
    Spool(tmp_path / "state" / "spool" / "sig").add(json.dumps(sc.message(sc.ALICE, T0, "spooled")).encode() + b"\n")  # an earlier poll's
    (folder / "mode").write_text("busy")
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "sig", "--max-seconds", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    try:  # the naive poll waits for its 30 s limit, then reports `receive: killed` with a warning
        wait_until(lambda: proc.poll() is not None, 60, "the poll to end")
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == "" and out == ""
    line = last_poll(tmp_path)
    assert line["receive"] == "busy" and "stopped" not in line and line["new"] == 1
    assert not [e for e in read_log(tmp_path / "state", "sig") if e.get("level") in ("warning", "error")]
    assert list(stored(tmp_path)) == [message_key("sig", f"{sc.ALICE}:{T0}")]
    (pid,) = map(int, (folder / "pids.log").read_text().split())

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 30, "the waiting signal-cli to be stopped")
    (folder / "mode").write_text("busy-exit")
    out2 = run_cli("poll", "sig", config=cfg)
    assert out2.returncode == 0 and out2.stderr == "" and last_poll(tmp_path)["receive"] == "busy"


def test_an_unlinked_or_missing_signal_cli_is_one_line_saying_how_to_link_it(tmp_path: Path) -> None:
    """A missing or unlinked signal-cli is one line saying how to install and link it (exit 1), no traceback."""
    cfg, folder = setup(tmp_path)
    (folder / "mode").write_text("unlinked")
    out = run_cli("poll", "sig", config=cfg)
    assert out.returncode == 1 and "signal-cli link -n memex" in out.stderr and "Traceback" not in out.stderr
    cfg2, _ = setup(tmp_path / "two", executable=str(tmp_path / "nowhere" / "signal-cli"))
    out = run_cli("poll", "sig", config=cfg2)
    assert out.returncode == 1 and "install signal-cli" in out.stderr and "Traceback" not in out.stderr


def test_a_hanging_receive_is_killed_at_the_deadline_and_its_lines_kept(tmp_path: Path) -> None:
    """signal-cli that never exits is killed at --max-seconds; the lines it printed (and acknowledged) are stored in the
    grace after the time limit (a first batch read past it is stored, not dropped: the poll warns poll.slow), so the
    spool is empty; the next poll stores the rest."""
    cfg, folder = setup(tmp_path)
    (folder / "mode").write_text("hang")
    sc.queue(folder, *(sc.message(sc.ALICE, T0 + i, f"m{i}") for i in range(4)))
    started = time.monotonic()
    out = run_cli("poll", "sig", "--max-seconds", "3", config=cfg)
    assert time.monotonic() - started < 20 and "Traceback" not in out.stderr
    hung = last_poll(tmp_path)
    assert hung["receive"] == "killed" and hung["status"] == "ok" and hung["new"] == 2
    assert len(sc.acked(folder)) == 2 and len(stored(tmp_path)) == 2
    assert hung["spool_count"] == 0  # what was acknowledged is stored: nothing waits in the spool
    (folder / "mode").write_text("normal")
    assert run_cli("poll", "sig", config=cfg).returncode == 0
    assert len(stored(tmp_path)) == 4


def test_kill_9_at_random_moments_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """memex poll killed with SIGKILL at random moments while messages keep arriving: after a clean poll every
    message the stand-in acknowledged is in the store exactly once and the spool is empty."""
    cfg, folder = setup(tmp_path)
    store = tmp_path / "state" / "store" / "messages" / "sig"
    rng = random.Random(11)
    kills = 0
    sent = 0
    for round_ in range(8):  # each poll is held (a test hold) at a random message of its round, so it is provably mid-poll;
        # every other round it is let go and killed a random moment later instead, so kills land at other points too
        sc.queue(folder, *(sc.message(sc.ALICE, T0 + sent + i, f"m{sent + i}") for i in range(150)))
        sent += 150
        gate = Gate(tmp_path, rng.randint(1, 150), name=f"gate{round_}")
        proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "sig"], stderr=subprocess.DEVNULL,
                                env=gate.env())  # fmt: skip
        gate.wait_held(proc)
        if round_ % 2:
            gate.open()
            try:
                proc.wait(timeout=rng.uniform(0.0, 0.3))
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(30)
    assert kills >= 4
    spool = tmp_path / "state" / "spool" / "sig"

    def settled() -> bool:  # a killed poll's signal-cli may still be writing its file: it is delivered once it ends
        return run_cli("poll", "sig", config=cfg).returncode == 0 and len(sc.acked(folder)) == sent and not os.listdir(spool / "tmp")

    wait_until(settled, 120, "every message acknowledged and every spool file delivered")
    out = run_cli("poll", "sig", config=cfg)
    assert out.returncode == 0, out.stderr
    acked = [json.loads(line)["envelope"]["timestamp"] for line in sc.acked(folder)]
    names = os.listdir(store)
    assert len(acked) == sent and sorted(names) == sorted(encode_id(f"{sc.ALICE}:{ts}") + ".json" for ts in acked)
    assert last_poll(tmp_path)["spool_count"] == 0
    assert not os.listdir(spool / "new") and not os.listdir(spool / "cur")


def test_a_poll_killed_before_its_store_sync_keeps_every_spooled_message(tmp_path: Path) -> None:
    """SIGKILL at the poll's first store sync (strace injects it at ``syncfs``): the messages read from the spool are
    not durable yet, so their spool entry must still be there; a clean poll then stores every acknowledged message
    exactly once. Deterministic, where the random kills above only sometimes land in this window."""
    need_strace()
    need_syncfs(tmp_path)
    cfg, folder = setup(tmp_path)
    sc.queue(folder, *(sc.message(sc.ALICE, T0 + i, f"m{i}") for i in range(40)))
    poll = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "sig"]
    killed = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "inject=syncfs:signal=KILL:when=1", *poll],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert killed.returncode != 0, "the injected SIGKILL never fired"
    assert len(sc.acked(folder)) == 40  # signal-cli acknowledged them: memex alone holds them now
    assert not stored(tmp_path)  # killed before any name was linked
    spool = tmp_path / "state" / "spool" / "sig"

    def settled() -> bool:  # the killed poll's signal-cli may still be writing its file: it is delivered once it ends
        return run_cli("poll", "sig", config=cfg).returncode == 0 and not os.listdir(spool / "tmp")

    wait_until(settled, 60, "the spool delivered after the kill")
    expected = sorted(message_key("sig", f"{sc.ALICE}:{T0 + i}") for i in range(40))
    assert sorted(stored(tmp_path)) == expected


def test_a_second_edit_targeting_the_first_edit_revises_the_original(tmp_path: Path) -> None:
    """Signal chains edits (the second targets the first edit's timestamp), across polls too: both edits are
    revisions of the original message, none of a message that does not exist."""
    cfg, folder = setup(tmp_path)
    sc.queue(folder, sc.message(sc.ALICE, T0, "v1"))
    sc.queue(folder, sc.envelope(sc.ALICE, T0 + 10, editMessage={"targetSentTimestamp": T0, "dataMessage": sc.data(T0 + 10, "v2")}))
    assert run_cli("poll", "sig", config=cfg).returncode == 0
    sc.queue(folder, sc.envelope(sc.ALICE, T0 + 20, editMessage={"targetSentTimestamp": T0 + 10, "dataMessage": sc.data(T0 + 20, "v3")}))
    assert run_cli("poll", "sig", config=cfg).returncode == 0
    revisions = stored(tmp_path, "revisions/")
    assert sorted(revisions) == sorted(revision_key("sig", f"{sc.ALICE}:{T0}", f"edit:{T0 + d}") for d in (10, 20))
    assert [r["text"] for _, r in sorted(revisions.items())] == ["v2", "v3"]


def test_lines_signal_cli_printed_in_public_bug_reports(tmp_path: Path) -> None:
    """Real receive output quoted in public issues (jneidel/signal-to-inbox#4, bbernhard/signal-cli-rest-api#680,
    AsamK/signal-cli#633): the receipt is skipped, the group reaction is a revision of the message it targets, the
    sync-sent message is mine, and the 2021 line without a service ID is quarantined, never filed under a number."""
    cfg, folder = setup(tmp_path)
    real = (Path(__file__).parent / "data" / "signal_cli_public.jsonl").read_bytes().splitlines()
    sc.queue(folder, *real)
    assert run_cli("poll", "sig", config=cfg).returncode == 0
    react = stored(tmp_path, "revisions/")[
        revision_key(
            "sig", "aaf50e83-2fff-41d5-86e3-a8cdfc3cbb3f:1715159057664", "reaction:27d6c025-997c-4b12-9f4f-a9b7a5791b7a:1715167958576"
        )
    ]
    assert react["conversation"]["id"] == "UIXSwit7KF/RqKfH9jqySnLTgqVCimGcEK25Dbf+yDw=" and react["extra"]["reaction"]["emoji"] == "👍"
    mine = stored(tmp_path)[message_key("sig", "4262f93c-14b1-4fa4-8ea3-04499d8ae0af:1744235749734")]
    assert mine["sender"]["is_me"] and mine["text"] == "Foo"
    raws = [v for k, v in file_objects(tmp_path / "state" / "store", "quarantine/").items() if k.endswith(".raw")]
    assert raws == [real[3]]
    line = last_poll(tmp_path)
    assert (line["new"], line["quarantined"], line["skipped"]) == (2, 1, {"receipt": 1})


def test_an_entry_ending_exactly_at_a_batch_boundary_is_removed(tmp_path: Path) -> None:
    """A spool entry whose last record is the last of a full batch is removed in that poll (not handed back and
    replayed as duplicates by the next one)."""
    from memex import runner
    from memex.config import load

    cfg_path, folder = setup(tmp_path)
    sc.queue(folder, *(sc.message(sc.ALICE, T0 + i, f"m{i}") for i in range(10)))
    result = runner.poll(load(cfg_path), "sig", batch_size=10)
    assert result.new == 10 and result.extra["spool_count"] == 0
    assert run_cli("poll", "sig", config=cfg_path).returncode == 0
    assert last_poll(tmp_path)["dup"] == 0
