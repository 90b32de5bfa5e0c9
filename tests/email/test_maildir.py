"""The Maildir poller on real folders: new/ and cur/, flag renames, equal timestamps, files moved in with old mtimes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from memex.errors import ConfigError
from memex.registry import make_poller
from memex.runner import poll
from pollers.email.maildir.poller import MaildirPoller, maildir_key
from tests.conftest import assert_valid, file_objects, read_log, run_cli, wait_until, write_config


def mail(n: int | str, msgid: bool = True) -> bytes:
    """A small message; ``msgid=False`` leaves the Message-ID out."""
    head = f"From: a@example.com\nTo: b@example.com\nSubject: s{n}\nDate: Tue, 01 Nov 2022 10:00:00 +0000\n"
    if msgid:
        head += f"Message-ID: <m{n}@example.com>\n"
    return (head + f"\nbody {n}\n").encode()


def make_maildir(root: Path) -> Path:
    """An empty Maildir at ``root``."""
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def deliver(root: Path, name: str, raw: bytes, sub: str = "new", mtime: float | None = None) -> Path:
    """Deliver like an MDA: write in tmp/, then rename into new/ (or cur/)."""
    tmp = root / "tmp" / name
    tmp.write_bytes(raw)
    if mtime is not None:
        os.utime(tmp, (mtime, mtime))
    final = root / sub / name
    os.rename(tmp, final)
    return final


def setup(tmp_path: Path, root: Path, **more: Any) -> memex_config.Config:
    """A config with one maildir source ``md`` (settle 0 so a poll sees what was just delivered)."""
    table = {"type": "maildir", "path": str(root), "settle_seconds": 0, **more}
    return memex_config.load(write_config(tmp_path, {"md": table}))


def records(cfg: memex_config.Config) -> dict[str, dict[str, Any]]:
    """native id -> record."""
    out = {}
    for key, body in file_objects(cfg.state_dir / "store").items():
        if key.endswith(".json"):
            doc = json.loads(body)
            out[doc["native_id"]] = doc
    return out


def test_maildir_key_drops_flags() -> None:
    """The key is the base name without the ``:2,FLAGS`` info."""
    assert maildir_key("1700000000.M1P2.host:2,S") == maildir_key("1700000000.M1P2.host") == "1700000000.M1P2.host"
    assert maildir_key("1700000000.M1P2.host:2,") == "1700000000.M1P2.host"


def test_new_mail_between_polls_and_flag_rename_never_make_a_second_object(tmp_path: Path) -> None:
    """new/ and cur/ are both read; a new/ -> cur/:2,S rename is at most a counted dup; later mail is picked up."""
    root = make_maildir(tmp_path / "Maildir")
    deliver(root, "100.a.host", mail(1))
    deliver(root, "101.b.host:2,S", mail(2), sub="cur")
    deliver(root, "102.c.host", mail(3, msgid=False))
    cfg = setup(tmp_path, root)
    first = poll(cfg, "md")
    assert (first.new, first.dup, first.quarantined) == (3, 0, 0)
    os.rename(root / "new" / "100.a.host", root / "cur" / "100.a.host:2,S")
    deliver(root, "103.d.host", mail(4))
    second = poll(cfg, "md")
    assert second.new == 1 and second.dup <= 1
    docs = records(cfg)
    assert len(docs) == 4
    assert docs["m1@example.com"]["extra"]["maildir_key"] == "100.a.host"
    assert sum(1 for d in docs.values() if d["native_id"].startswith("sha256:")) == 1
    assert {d["type"] for d in assert_valid(list(docs.values()))} == {"message"}  # memex.message/1
    assert poll(cfg, "md").status == "idle"


def test_equal_ctimes_neither_skip_nor_repeat(tmp_path: Path) -> None:
    """Files sharing a ctime (hard links of one inode) are each read exactly once, even one per batch."""
    root = make_maildir(tmp_path / "Maildir")
    for i in range(3):
        first = deliver(root, f"{i}.a.host", mail(i))
        os.link(first, root / "new" / f"{i}.b.host")  # a second name on the same inode: the same ctime
    poller = MaildirPoller("md", root, ("INBOX",), settle_seconds=0)
    entries = poller._list("INBOX")
    assert len({e.ctime_ns for e in entries}) <= 3 < len(entries) == 6
    cursor: Any = None
    keys: list[str] = []
    while True:
        batch = poller.fetch(cursor, 1)
        keys += [i.message.extra["maildir_key"] for i in batch.items if i.message]
        if not batch.items and batch.cursor == cursor:
            break
        cursor = batch.cursor
    assert sorted(keys) == sorted(e.key for e in entries)
    # The naive cursor (newest ctime only, strictly after it) loses one name of each pair when batches split them.
    naive_after, naive_keys = -1, []
    while True:
        fresh = sorted((e for e in entries if e.ctime_ns > naive_after), key=lambda e: (e.ctime_ns, e.key))[:1]
        if not fresh:
            break
        naive_keys.append(fresh[0].key)
        naive_after = fresh[0].ctime_ns
    assert len(naive_keys) < len(entries)


def test_file_moved_in_with_an_old_mtime_is_not_lost(tmp_path: Path) -> None:
    """A message moved in keeping a years-old mtime is still read (ctime cursor); an mtime cursor would skip it."""
    root = make_maildir(tmp_path / "Maildir")
    deliver(root, "200.a.host", mail("recent"))
    cfg = setup(tmp_path, root)
    assert poll(cfg, "md").new == 1
    old = time.time() - 5 * 365 * 86400
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "150.old.host:2,S").write_bytes(mail("old"))
    os.utime(outside / "150.old.host:2,S", (old, old))
    os.rename(outside / "150.old.host:2,S", root / "cur" / "150.old.host:2,S")
    # The naive cursor (newest mtime seen) skips it:
    newest_mtime = (root / "new" / "200.a.host").stat().st_mtime_ns
    assert (root / "cur" / "150.old.host:2,S").stat().st_mtime_ns < newest_mtime
    result = poll(cfg, "md")
    assert result.new == 1
    assert "mold@example.com" in records(cfg)


def test_subfolders_by_glob_and_same_message_twice_is_one_object(tmp_path: Path) -> None:
    """Maildir++ subfolders are chosen by name or glob; one Message-ID in two folders is one object."""
    root = make_maildir(tmp_path / "Maildir")
    make_maildir(root / ".Sent")
    make_maildir(root / ".Archive.2020")
    deliver(root, "1.a", mail(1))
    deliver(root / ".Sent", "2.b", mail(1))
    deliver(root / ".Archive.2020", "3.c", mail(3))
    cfg = setup(tmp_path, root, folders=["INBOX", "Sent", "Archive.*"])
    result = poll(cfg, "md")
    assert (result.new, result.dup) == (2, 1)
    assert set(result.positions_after) == {"INBOX", "Sent", "Archive.2020"}


def test_settle_window_defers_files_that_just_arrived(tmp_path: Path) -> None:
    """With settle_seconds, a file that arrived just now waits for a later poll instead of racing the listing."""
    root = make_maildir(tmp_path / "Maildir")
    deliver(root, "1.a", mail(1))
    poller = MaildirPoller("md", root, ("INBOX",), settle_seconds=2)
    assert poller.fetch(None, 10).items == []
    batch = wait_until(lambda: poller.fetch(None, 10).items, 10, "the file to settle", interval=0.2)
    assert [i.message.native_id for i in batch if i.message] == ["m1@example.com"]


def test_head_and_history(tmp_path: Path) -> None:
    """head() is at the newest file; history() walks by (mtime, key), resumes after a checkpoint and bounds by date."""
    root = make_maildir(tmp_path / "Maildir")
    deliver(root, "1.a", mail(1))
    deliver(root, "2.b", mail(2).replace(b"01 Nov 2022", b"05 Nov 2022"))
    poller = MaildirPoller("md", root, ("INBOX",), settle_seconds=0)
    head = poller.head()
    assert poller.fetch(head, 10).items == []
    walked = list(poller.history(None, None, None))
    assert len(walked) == 2
    assert [i.cursor for i in poller.history(None, None, walked[0].cursor)] == [walked[1].cursor]
    from datetime import UTC, datetime

    window = list(poller.history(datetime(2022, 11, 3, tzinfo=UTC), None, None))
    assert [i.message.native_id for i in window if i.message] == ["m2@example.com"]


def test_cli_poll_and_missing_folder(tmp_path: Path) -> None:
    """The CLI polls a Maildir end to end; a wrong path is one clear error line and exit 1."""
    root = make_maildir(tmp_path / "Maildir")
    deliver(root, "1.a", mail(1))
    path = write_config(
        tmp_path,
        {"md": {"type": "maildir", "path": str(root), "settle_seconds": 0}, "gone": {"type": "maildir", "path": str(tmp_path / "nope")}},
    )
    ok = run_cli("poll", "md", config=path)
    assert ok.returncode == 0, ok.stderr[-500:]
    assert "messages/md/m1%40example.com.eml" in file_objects(tmp_path / "state" / "store")
    bad = run_cli("poll", "gone", config=path)
    assert bad.returncode == 1 and "no such Maildir folder" in bad.stderr and "Traceback" not in bad.stderr


def test_config_mistakes_name_the_key(tmp_path: Path) -> None:
    """A missing path or an unknown key is a ConfigError naming the key."""
    path = write_config(tmp_path, {"md": {"type": "maildir", "folder": "x", "path": "m"}})
    with pytest.raises(ConfigError, match=r"sources\.md\.folder"):
        make_poller(memex_config.load(path).source("md"))
    path = write_config(tmp_path, {"md": {"type": "maildir"}})
    with pytest.raises(ConfigError, match=r"sources\.md\.path"):
        make_poller(memex_config.load(path).source("md"))


def test_a_mail_client_marking_one_message_read_each_minute_is_not_stuck(tmp_path: Path) -> None:
    """Each poll meets one renamed file (new/ -> cur/ with :2,S): a duplicate the poller expected; health stays OK for many polls."""
    from memex.observe import health
    from tests.conftest import read_log

    root = make_maildir(tmp_path / "Maildir")
    cfg = setup(tmp_path, root)
    names = [f"{1700000000 + n}.M{n}P1.host" for n in range(6)]
    for n, name in enumerate(names):
        deliver(root, name, mail(n))
    assert poll(cfg, "md").new == 6
    for name in names[:5]:  # one message read per minute
        os.rename(root / "new" / name, root / "cur" / f"{name}:2,S")
        result = poll(cfg, "md")
        assert (result.new, result.dup, result.dup_expected) == (0, 1, 1)
    events = read_log(tmp_path / "state", "md")
    assert health.assess(events, now=time.time()).state == health.OK


def test_a_cursor_ahead_of_the_clock_loses_no_mail(tmp_path: Path) -> None:
    """Cursor set an hour ahead (a clock that then stepped back): mail delivered now (ctime below it) is still stored, once."""
    root = make_maildir(tmp_path / "Maildir")
    deliver(root, "1.a", mail(1))
    path = write_config(tmp_path, {"md": {"type": "maildir", "path": str(root), "settle_seconds": 0}})
    cfg = memex_config.load(path)
    assert poll(cfg, "md").new == 1
    future = time.time_ns() + 3600 * 10**9
    cursor = json.dumps({"folders": {"INBOX": {"ctime_ns": future, "names": []}}})
    done = run_cli("cursor", "set", "md", cursor, config=path)
    assert done.returncode == 0, done.stderr[-500:]
    deliver(root, "2.b", mail(2))
    deliver(root, "3.c", mail(3), sub="cur")
    naive = [e for e in MaildirPoller("md", root, ("INBOX",), 0)._list("INBOX") if e.ctime_ns > future]
    assert naive == []  # what a plain "after the cursor" scan sees: nothing, both mails would be lost
    result = poll(cfg, "md")
    assert (result.status, result.new, result.dup) == ("ok", 2, 1)  # mail 1 is read again, a counted duplicate
    assert sorted(records(cfg)) == ["m1@example.com", "m2@example.com", "m3@example.com"]
    assert result.positions_after == {"INBOX": future}  # never moved back
    warnings = [e for e in read_log(cfg.state_dir, "md") if e["event"] == "source.warning"]
    assert len(warnings) == 1 and "ahead of this machine's clock" in warnings[0]["reason"]
    assert poll(cfg, "md").status == "idle"  # remembered: nothing read twice more
    deliver(root, "4.d", mail(4))
    again = poll(cfg, "md")
    assert (again.new, again.dup) == (1, 0)


def test_a_poll_lists_the_maildir_once_however_many_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Draining four batches' worth of mail lists the root, new/ and cur/ once each: one listing per poll, not per batch.

    The real ``os.scandir`` and ``os.listdir`` run; a wrapper only records which folders they were asked for.
    """
    root = make_maildir(tmp_path / "Maildir")
    for i in range(35):
        deliver(root, f"{i}.host", mail(i))
    deliver(root, "cur.host:2,S", mail("c"), sub="cur")
    cfg = setup(tmp_path, root)
    listed: list[str] = []
    scandir, listdir = os.scandir, os.listdir

    def counting_scandir(path: Any = ".") -> Any:
        listed.append(os.fspath(path))
        return scandir(path)

    def counting_listdir(path: Any = ".") -> Any:
        listed.append(os.fspath(path))
        return listdir(path)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    monkeypatch.setattr(os, "listdir", counting_listdir)
    result = poll(cfg, "md", batch_size=10)
    monkeypatch.undo()
    assert (result.status, result.new) == ("ok", 36)
    mine = sorted(os.path.relpath(p, root) for p in listed if Path(p).resolve().is_relative_to(root.resolve()))
    assert mine == [".", "cur", "new"]
    assert poll(cfg, "md").status == "idle"
