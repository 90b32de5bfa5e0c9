"""The mbox source: splitting and unquoting per variant, real archives against Python's ``mailbox``, Takeout's labels and
one object with Gmail's IMAP copy, Thunderbird and Apple Mail folders, growing and rewritten files."""

from __future__ import annotations

import io
import json
import mailbox
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from memex.errors import ConfigError
from memex.registry import make_poller
from memex.runner import poll
from pollers.email.mbox.poller import MboxPoller, folder_of
from pollers.email.mbox.read import Reader, takeout_fields, unquote
from tests.conftest import assert_valid, file_objects, read_log, write_config
from tests.email.test_imap import PASSWORD_ENV, source_table
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server

__all__ = ["dovecot_server"]  # the `dovecot` fixture

DATA = Path(__file__).parent / "data" / "mbox"
SEP = "From sender@example.com Tue Nov  1 10:00:00 2022"


def mail(n: int | str, body: str = "", *, msgid: bool = True, eol: str = "\n", date: str = "Tue, 01 Nov 2022 10:00:00 +0000") -> bytes:
    """A small mail (its own Message-ID unless ``msgid=False``) with ``body`` under a line naming it."""
    head = ["From: Alice <alice@example.com>", "To: bob@example.com", f"Subject: mail {n}", f"Date: {date}"]
    if msgid:
        head.append(f"Message-ID: <mb{n}@example.com>")
    text = "\n".join([*head, "", f"body of {n}", *([body] if body else []), ""])
    return text.replace("\n", eol).encode()


def quote(raw: bytes) -> bytes:
    """``raw`` with one more ``>`` in front of each ``>*From `` line (mboxrd)."""
    return b"\n".join(b">" + ln if ln.lstrip(b">").startswith(b"From ") else ln for ln in raw.split(b"\n"))


def mbox_of(mails: list[bytes], sep: str = SEP) -> bytes:
    """An mboxrd file of ``mails`` (each ``>*From `` line given one more ``>``), a blank line after each."""
    out = b""
    for raw in mails:
        quoted = quote(raw)
        out += sep.encode() + b"\n" + quoted + (b"" if quoted.endswith(b"\n") else b"\n") + b"\n"
    return out


def split(data: bytes, variant: str = "auto") -> list[bytes]:
    """The mails the reader finds in ``data``."""
    return [m.raw for m in Reader(io.BytesIO(data), 0, variant, chunk=64).mails()]


def setup(tmp_path: Path, path: Path, **more: Any) -> memex_config.Config:
    """A config with one mbox source ``mb`` over ``path`` (no settle wait unless given)."""
    table = {"type": "mbox", "path": str(path), "settle_seconds": 0, **more}
    return memex_config.load(write_config(tmp_path, {"mb": table}))


def records(cfg: memex_config.Config, source: str = "mb") -> dict[str, dict[str, Any]]:
    """native id -> record of every stored message of ``source``."""
    out = {}
    for key, body in file_objects(cfg.state_dir / "store", f"messages/{source}/").items():
        if key.endswith(".json"):
            doc = json.loads(body)
            out[doc["native_id"]] = doc
    return out


def test_real_archives_split_as_pythons_mailbox_does() -> None:
    """Every real archive (Pipermail, Perceval's test files) gives the mails Python's ``mailbox.mbox`` gives, byte for
    byte once both are unquoted by one rule (Python leaves ``>From `` as it is) and the blank line before the next
    separator is dropped (Python keeps the last mail's); each renders to a valid record."""
    from pollers.email.mail.render import render

    files = sorted(DATA.glob("*.mbox"))
    assert len(files) >= 7
    total = 0
    for path in files:
        box = mailbox.mbox(path, create=False)
        theirs = [unquote(box.get_bytes(k), "mboxrd").rstrip(b"\n") for k in box.iterkeys()]
        box.close()
        mine = [m.raw for m in Reader(path.open("rb"), 0, chunk=256).mails()]
        assert [m.rstrip(b"\n") for m in mine] == theirs, path.name
        assert_valid([render(raw, "mb").to_dict() for raw in mine])
        total += len(mine)
    assert total == 19


def test_each_variant_unquotes_as_it_defines() -> None:
    """mboxrd takes one ``>`` off each ``>+From `` line (exact); mboxo and mboxcl only off ``>From `` (an original
    ``>From `` line loses its ``>``: the ambiguity, decided for the common case); mboxcl2 never unquotes."""
    body = b"From here\n>From there\n>>From everywhere\n"
    assert unquote(b">From here\n>>From there\n>>>From everywhere\n", "mboxrd") == body
    assert unquote(b">From here\n>From there\n>>From everywhere\n", "mboxo") == b"From here\nFrom there\n>>From everywhere\n"
    assert unquote(b">From here\n", "mboxcl") == b"From here\n"
    assert unquote(body, "mboxcl2") == body
    written = mbox_of([mail(1, body.decode()), mail(2)])
    assert split(written, "mboxrd") == [mail(1, body.decode()), mail(2)]
    assert split(written) == [mail(1, body.decode()), mail(2)]  # auto: the mboxrd rule


def test_content_length_governs_mboxcl2_and_a_wrong_one_is_passed_over() -> None:
    """mboxcl2: a body holding an unquoted separator-like line followed by a header stays one mail when its
    Content-Length says so (auto follows it too); a Content-Length that does not land on a separator is ignored."""
    inner = "From x@example.com Mon Jan  2 10:00:00 2023\nSubject: not a mail\n"
    raw = mail(1, inner)
    head, _, rest = raw.partition(b"\n\n")
    cl = head + f"\nContent-Length: {len(rest)}".encode() + b"\n\n" + rest
    data = SEP.encode() + b"\n" + cl + b"\n" + SEP.encode() + b"\n" + mail(2) + b"\n"
    assert split(data, "mboxcl2") == [cl, mail(2)]
    assert split(data) == [cl, mail(2)]
    wrong = cl.replace(f"Content-Length: {len(rest)}".encode(), b"Content-Length: 3")
    parts = split(SEP.encode() + b"\n" + wrong + b"\n" + SEP.encode() + b"\n" + mail(2) + b"\n", "mboxcl2")
    assert len(parts) == 3 and parts[-1] == mail(2)  # read up to each separator instead (the inner one too)
    m = next(Reader(io.BytesIO(SEP.encode() + b"\n" + wrong), 0, "mboxcl2").mails())
    assert any("Content-Length" in p for p in m.problems)


def test_the_bytes_before_each_mail_end_are_the_files_across_chunks(tmp_path: Path) -> None:
    """What the cursor hashes (the 4 KiB before a mail's end) comes from the reader's buffer, which is cut down between
    mails: for every mail of a file many chunks long it equals the file's bytes there."""
    data = mbox_of([mail(i, "words " * (i % 50)) for i in range(800)])
    path = tmp_path / "box"
    path.write_bytes(data)
    with path.open("rb") as fh:
        reader = Reader(fh, 0, chunk=4096)
        ends = [(m.end, reader.before(m.end, 4096)) for m in reader.mails()]
    assert len(ends) == 800 and reader.base > 0  # the buffer was cut down on the way
    assert all(got == data[max(0, end - 4096) : end] for end, got in ends)


def test_a_from_line_the_writer_did_not_quote_stays_in_its_mail() -> None:
    """A body line starting ``From `` without a separator's date, or with one but no header after it, is not a
    separator: the mail is whole and the line counted."""
    body = "\nFrom the desk of Alice: hello\n\nFrom x Mon Jan  2 10:00:00 2023\nnot a header line\n"
    mails = list(Reader(io.BytesIO(SEP.encode() + b"\n" + mail(1, body) + b"\n"), 0, "mboxo").mails())
    assert [m.raw for m in mails] == [mail(1, body)]
    assert mails[0].unquoted == 2


def test_takeout_fields_come_off_the_mail_into_extra() -> None:
    """Takeout's leading X-GM-THRID and X-Gmail-Labels (folded, quoted labels with commas) become values; the rest of
    the mail is left byte for byte; fields further down are left in place."""
    raw = b'X-GM-THRID: 1773664405479613283\r\nX-Gmail-Labels: Inbox,"Travel, 2023",\r\n Category Updates\r\nFrom: a@b\r\n\r\nx\r\n'
    rest, fields = takeout_fields(raw)
    assert rest == b"From: a@b\r\n\r\nx\r\n"
    assert fields == {"thrid": "1773664405479613283", "labels": ["Inbox", "Travel, 2023", "Category Updates"]}
    assert takeout_fields(b"From: a@b\r\nX-GM-THRID: 1\r\n\r\nx")[1] == {}
    assert takeout_fields(b"X-Gmail-Labels: Inbox,=?UTF-8?Q?Fran=C3=A7ais?=\n\nx")[1] == {"labels": ["Inbox", "Fran\u00e7ais"]}


def takeout(mails: list[tuple[int, bytes, str]]) -> bytes:
    """A Takeout-shaped mbox: ``From <msgid>@xxx`` separators, X-GM-THRID and X-Gmail-Labels in front, CRLF mails,
    ``>*From `` body lines quoted with one more ``>``."""
    out = b""
    for msgid, raw, labels in mails:
        out += f"From {msgid}@xxx Tue Nov 01 10:00:00 +0000 2022\n".encode()
        quoted = quote(raw)
        out += f"X-GM-THRID: {msgid}\r\nX-Gmail-Labels: {labels}\r\n".encode() + quoted + b"\n"
    return out


def test_a_takeout_mail_and_the_same_mail_from_gmail_imap_are_one_object(
    tmp_path: Path, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same mails fetched over IMAP (from a real Dovecot) and read from a Takeout mbox with ``into`` naming the
    IMAP source are one object each (same key, counted as duplicates), with or without a Message-ID; a Takeout
    read on its own keeps the labels, the thread ID and Gmail's message ID in ``extra``."""
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    raws = [mail(1, "From here on\n", eol="\r\n"), mail(2, eol="\r\n", msgid=False)]
    user = dovecot.new_user()
    for raw in raws:
        dovecot.append(user, "INBOX", raw)
    box = tmp_path / "Takeout" / "Mail" / "All mail Including Spam and Trash.mbox"
    box.parent.mkdir(parents=True)
    box.write_bytes(takeout([(1773664405479613283, raws[0], 'Inbox,"Travel, 2023",Opened'), (1773664142827023060, raws[1], "Sent")]))
    sources = {
        "gmail": source_table(dovecot, user),
        "takeout": {"type": "mbox", "path": str(box), "settle_seconds": 0, "into": "gmail"},
        "alone": {"type": "mbox", "path": str(box.parent), "settle_seconds": 0},
    }
    cfg = memex_config.load(write_config(tmp_path, sources))
    assert poll(cfg, "gmail").new == 2
    first = records(cfg, "gmail")
    again = poll(cfg, "takeout")
    assert (again.new, again.dup, again.quarantined) == (0, 2, 0)
    assert records(cfg, "gmail") == first
    alone = records(cfg, "alone") if poll(cfg, "alone").new == 2 else {}
    assert set(alone) == set(first)
    doc = alone["mb1@example.com"]
    gmail = doc["extra"]["gmail"]  # the IMAP poller's shape (pollers.email.imap.gmail)
    assert gmail == {"msgid": "1773664405479613283", "msgid_hex": "189d5261275de363", "thrid": "1773664405479613283",
                     "labels": ["Inbox", "Travel, 2023", "Opened"]}  # fmt: skip
    assert doc["extra"]["folder"] == "All mail Including Spam and Trash"
    assert_valid(list(alone.values()))


def test_thunderbird_and_apple_mail_folders(tmp_path: Path) -> None:
    """A folder is searched for mbox files at any depth: Thunderbird's ``Inbox`` and ``Work.sbd/Projects`` beside
    their ``.msf`` indexes, an Apple Mail ``Old.mbox/mbox`` bundle; empty files pass silently, a ``*.mbox`` that is
    not one gets a warning line; ``extra.folder`` names each."""
    root = tmp_path / "Local Folders"
    (root / "Work.sbd").mkdir(parents=True)
    (root / "Old.mbox").mkdir()
    (root / "Inbox").write_bytes(b"From - Tue Nov  1 10:00:00 2022\nX-Mozilla-Status: 0001\n" + mail(1))
    (root / "Inbox.msf").write_bytes(b'// <!-- <mdb:mork:z v="1.4"/> -->\n')
    (root / "Trash").write_bytes(b"")
    (root / "Work.sbd" / "Projects").write_bytes(mbox_of([mail(2), mail(3)]))
    (root / "Old.mbox" / "mbox").write_bytes(mbox_of([mail(4)]))
    (root / "Old.mbox" / "Info.plist").write_bytes(b"<plist/>")
    (root / "notes.mbox").write_bytes(b"Subject: not an mbox\n\nhello\n")
    cfg = setup(tmp_path, root)
    result = poll(cfg, "mb")
    assert (result.new, result.quarantined, result.status) == (4, 0, "ok")
    folders = {d["native_id"]: d["extra"]["folder"] for d in records(cfg).values()}
    assert folders == {
        "mb1@example.com": "Inbox",
        "mb2@example.com": "Work/Projects",
        "mb3@example.com": "Work/Projects",
        "mb4@example.com": "Old",
    }
    warnings = [e["reason"] for e in read_log(cfg.state_dir, "mb") if e.get("event") == "source.warning"]
    assert warnings == ["notes.mbox: not an mbox file (it does not start with a 'From ' line); skipped"]
    assert folder_of("Inbox.sbd/Sub.sbd/Deep") == "Inbox/Sub/Deep"
    assert poll(cfg, "mb").status == "idle"


def test_a_growing_file_is_read_on_and_its_last_mail_waits_until_the_file_settles(tmp_path: Path) -> None:
    """Mails appended to a file (Thunderbird) are read by the next poll only; a last mail still being written (the
    file changed within settle_seconds) is left for a later poll, so a half-written mail is never stored half."""
    box = tmp_path / "Inbox"
    box.write_bytes(b"")  # an empty folder file is no mail yet, not an error
    cfg = setup(tmp_path, box, settle_seconds=3600)
    assert poll(cfg, "mb").status == "idle"
    box.write_bytes(mbox_of([mail(1), mail(2)]))
    first = poll(cfg, "mb")
    assert first.new == 1  # mail 2 is last and the file just changed
    half = mbox_of([mail(3, "a long body")])
    with box.open("ab") as fh:
        fh.write(half[:-20])  # the writer is in the middle of mail 3
    assert poll(cfg, "mb").new == 1  # mail 2, now followed by a separator
    with box.open("ab") as fh:
        fh.write(half[-20:])
    old = time.time() - 7200
    os.utime(box, (old, old))
    assert poll(cfg, "mb").new == 1
    docs = records(cfg)
    assert sorted(docs) == ["mb1@example.com", "mb2@example.com", "mb3@example.com"]
    assert "a long body" in docs["mb3@example.com"]["text"]
    assert poll(cfg, "mb").status == "idle"


def test_a_rewritten_file_is_read_again_with_duplicates_counted_and_nothing_lost(tmp_path: Path) -> None:
    """A file rewritten before the point read (Thunderbird compacting: a deleted mail gone, the file replaced) is
    detected and read again from its start (a logged reset): its mails stored before count as duplicates and a mail
    put in front of the old offset is stored; a file only appended to is not read again."""
    box = tmp_path / "Inbox"
    box.write_bytes(mbox_of([mail(1), mail(2), mail(3)]))
    cfg = setup(tmp_path, box)
    assert poll(cfg, "mb").new == 3
    compacted = tmp_path / "Inbox.tmp"
    moz = b"X-Mozilla-Status: 0000\nX-Mozilla-Keys:         \n"  # what Thunderbird writes in front of each mail
    compacted.write_bytes(mbox_of([moz + mail(n) for n in (1, 3, 4, "4b")]))  # 2 deleted; 4 at an offset already passed
    assert compacted.stat().st_size > box.stat().st_size
    os.replace(compacted, box)
    result = poll(cfg, "mb")
    assert (result.new, result.dup, result.reset is not None) == (2, 2, True)
    assert sorted(records(cfg)) == ["mb1@example.com", "mb2@example.com", "mb3@example.com", "mb4@example.com", "mb4b@example.com"]
    resets = [e for e in read_log(cfg.state_dir, "mb") if e.get("event") == "source.reset"]
    assert len(resets) == 1 and "rewritten or compacted" in resets[0]["reason"]
    data = box.read_bytes()  # mail 1 read and mail 4b tagged, in place (same length), as Thunderbird does
    tagged = data.rsplit(b"Keys:         ", 1)
    box.write_bytes(b"Keys: $label1 ".join(tagged).replace(b"Status: 0000", b"Status: 0001", 1))
    with box.open("ab") as fh:
        fh.write(mbox_of([mail(5)]))
    again = poll(cfg, "mb")
    assert (again.new, again.dup, again.reset) == (1, 0, None)  # flags rewritten in place are not a rewrite


def test_start_now_begins_after_the_mails_already_there(tmp_path: Path) -> None:
    """``start = "now"``: the mails a file holds at the first poll are left to history; later ones are read."""
    box = tmp_path / "Inbox"
    box.write_bytes(mbox_of([mail(1), mail(2)]))
    cfg = setup(tmp_path, box, start="now")
    assert poll(cfg, "mb").status == "idle"
    with box.open("ab") as fh:
        fh.write(mbox_of([mail(3)]))
    assert (poll(cfg, "mb").new, sorted(records(cfg))) == (1, ["mb3@example.com"])


def test_nul_bytes_between_mails_and_a_huge_mail(tmp_path: Path) -> None:
    """A run of NUL bytes where a crash left them is passed over, the mails on both sides read; a "mail" longer than
    the limit is not held in memory: its beginning is kept (for quarantine) and the next mail read."""
    data = mbox_of([mail(1)]) + b"\0" * 5000 + mbox_of([mail(2)])
    assert split(data) == [mail(1), mail(2)]
    huge = SEP.encode() + b"\nSubject: big\n\n" + b"x" * 5000 + b"\n\n" + mbox_of([mail(3)])
    reader = Reader(io.BytesIO(huge), 0, chunk=256)
    reader.max_mail = 1000
    got = list(reader.mails())
    assert [m.too_big for m in got] == [True, False] and got[1].raw == mail(3) and len(got[0].raw) <= 1 << 20


def test_a_batch_of_large_mails_is_cut_short_by_its_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch holds at most about BATCH_BYTES of mail whatever ``limit`` asks (memory stays flat with large mails);
    the next fetch goes on right after it, and every mail comes once."""
    import pollers.email.mbox.poller as mbox_module

    box = tmp_path / "Inbox"
    box.write_bytes(mbox_of([mail(i, "x" * 1000) for i in range(10)]))
    monkeypatch.setattr(mbox_module, "BATCH_BYTES", 2500)
    poller, cursor, sizes, ids = MboxPoller("mb", box, settle_seconds=0), None, [], []
    while True:
        batch = poller.fetch(cursor, 500)
        if not batch.items and batch.cursor == cursor:
            break
        sizes.append(len(batch.items))
        ids += [i.message.native_id for i in batch.items if i.message]
        cursor = batch.cursor
    assert max(sizes) == 3 and ids == [f"mb{i}@example.com" for i in range(10)]


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        """Always a terminal."""
        return True


def test_progress_is_drawn_on_a_terminal_only_and_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal a poll draws ``NAME: FILE NN% (N mails)`` (a control character in a file name shown as ``?``) and
    clears it at the end; off a terminal nothing is written."""
    box = tmp_path / "In\x1bbox"
    box.parent.mkdir(exist_ok=True)
    box.write_bytes(mbox_of([mail(1), mail(2)]))
    for tty in (True, False):
        err = Terminal() if tty else io.StringIO()
        monkeypatch.setattr("sys.stderr", err)
        poller = MboxPoller("mb", tmp_path, settle_seconds=0)
        assert len(poller.fetch(None, 10).items) == 2
        poller.close()
        expected = "\r\x1b[2Kmb: In?box 100% (2 mails)\r\x1b[2K" if tty else ""
        assert err.getvalue() == expected


def test_config_mistakes_name_the_key(tmp_path: Path) -> None:
    """A wrong variant, a bad ``into`` or a missing path is a ConfigError naming the key."""
    for table, key in (({"variant": "mboxq", "path": "x"}, "variant"), ({"into": "a b", "path": "x"}, "into"), ({}, "path")):
        path = write_config(tmp_path, {"mb": {"type": "mbox", **table}})
        with pytest.raises(ConfigError, match=rf"sources\.mb\.{key}"):
            make_poller(memex_config.load(path).source("mb"))
    assert isinstance(
        make_poller(memex_config.load(write_config(tmp_path, {"mb": {"type": "mbox", "path": "x"}})).source("mb")), MboxPoller
    )


def test_mbox_conforms_to_the_plugin_contract_and_a_copy_gives_the_same_records(tmp_path: Path) -> None:
    """The conformance kit (memex.conformance) on a Thunderbird-like folder file that grows: drain, resume from every
    cursor, deterministic, caught up, new mail, ``head``; a copy of the folder elsewhere gives the same record bytes
    (records name the file below ``path``, never ``path`` itself); memex's own poll twice."""
    from memex.conformance import check_poll, check_poller

    root = tmp_path / "Local Folders"
    root.mkdir()
    box = root / "Inbox"
    box.write_bytes(mbox_of([mail(n) for n in range(7)]))
    copy = tmp_path / "Copy"
    copy.mkdir()
    (copy / "Inbox").write_bytes(box.read_bytes())
    table = {"type": "mbox", "path": str(root), "settle_seconds": 0}
    cfg = memex_config.load(write_config(tmp_path, {"mb": table, "cp": {**table, "path": str(copy)}}))
    added = [7]

    def add(n: int) -> None:
        with box.open("ab") as fh:
            fh.write(mbox_of([mail(i) for i in range(added[0], added[0] + n)]))
        added[0] += n

    other = tmp_path / "other"
    other.mkdir()
    copy_cfg = memex_config.load(write_config(other, {"mb": {**table, "path": str(copy)}}))  # the same name, another path
    ran = check_poller(lambda: make_poller(cfg.source("mb")), expected=7, add=add, copy=lambda: make_poller(copy_cfg.source("mb")))
    assert {"drain", "resume", "copy", "new", "head"} <= set(ran)
    check_poll(cfg, "cp", expected=7)


GIT_DATA = DATA / "git"


def _mailsplit(path: Path, tmp: Path, *, mboxrd: bool = False) -> list[bytes]:
    """The mails ``git mailsplit`` (the reference reader) makes of ``path``, without their From_ line."""
    out = tmp / f"split-{path.name}"
    out.mkdir()
    subprocess.run(["git", "mailsplit", *(["--mboxrd"] if mboxrd else []), f"-o{out}", str(path)], check=True, capture_output=True,
                   timeout=60)  # fmt: skip
    return [p.read_bytes().split(b"\n", 1)[1].rstrip(b"\n") for p in sorted(out.iterdir())]


@pytest.mark.parametrize(
    ("name", "variant", "shape"),
    [("sample.mbox", "auto", "as written"), ("sample.mboxrd", "mboxrd", "as written"), ("sample.mbox", "auto", "cr-only"),
     ("sample.mbox", "auto", "rfc2822-dates"), ("sample.mbox", "auto", "blank-lines-first")],
)  # fmt: skip
def test_gits_mailsplit_samples_read_as_mailsplit_reads_them(tmp_path: Path, name: str, variant: str, shape: str) -> None:
    """git's own mailsplit test archives (format-patch mails, gmane news posts, mboxrd quoting) give the mails ``git
    mailsplit`` gives, byte for byte; so do the same file with classic Mac line ends (compared with mailsplit of the LF
    file, which mailsplit cannot read itself: memex stores LF), with RFC 2822 dates in its separators, and with blank
    lines before its first separator (both of which mailsplit reads)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    original = (GIT_DATA / name).read_bytes()
    data = {
        "as written": original,
        "cr-only": original.replace(b"\n", b"\r"),
        "rfc2822-dates": re.sub(rb"(?m)^From (\S+) Mon Sep 17 00:00:00 2001$", rb"From \1 Sun, 11 Nov 2007 06:58:35 +0200", original),
        "blank-lines-first": b"\n\n\n" + original,
    }[shape]
    assert data != original or shape == "as written"
    path = tmp_path / name
    path.write_bytes(data)
    theirs = _mailsplit(path if shape != "cr-only" else GIT_DATA / name, tmp_path, mboxrd=variant == "mboxrd")
    mine = [m.raw.rstrip(b"\n") for m in Reader(path.open("rb"), 0, variant, chunk=256).mails()]
    assert len(mine) == len(theirs) == {"sample.mbox": 8, "sample.mboxrd": 2}[name]
    assert mine == theirs


EMAIL_FOLDER = DATA / "email-folder"
# The subjects Email::Folder's own test (t/01mbox.t) expects of its archives: the reference these are read against.
EF_SUBJECTS = sorted(["R: [p5ml] karie kahimi binge...help needed", "RE: [p5ml] Re: karie kahimi binge...help needed"]
                     + ["Re: January's meeting"] * 3 + ["Re: [p5ml] karie kahimi binge...help needed"] * 2
                     + ["Re: [rt-users] Configuration Problem", "[p5ml] Re: karie kahimi binge...help needed",
                        "[rt-users] Configuration Problem"])  # fmt: skip
EF_CL2 = ["Fifteenth anniversary of Perl.", "Re: Fifteenth anniversary of Perl.", "Re: Fifteenth anniversary of Perl."]


@pytest.mark.parametrize(
    ("name", "subjects"),
    [("testmbox", EF_SUBJECTS), ("testmbox.mac", EF_SUBJECTS), ("testmbox.dos", EF_SUBJECTS), ("mboxcl2", EF_CL2),
     ("mboxcl2.lies", EF_CL2)],
)  # fmt: skip
def test_email_folders_archives_lf_cr_crlf_and_mboxcl2_read_whole(name: str, subjects: list[str]) -> None:
    """Perl Email::Folder's test archives, one mailbox written with LF, classic Mac CR and DOS CRLF line ends, and two
    mboxcl2 files (one with a Content-Length that lies): memex reads the mails that reader's own test expects (count
    and subjects); the LF file's mails are Python ``mailbox``'s byte for byte, and the CR and CRLF files' mails are
    the LF file's with their line ends (their writer added Content-Length and Lines to the first)."""
    import email

    mails = list(Reader((EMAIL_FOLDER / name).open("rb"), 0, chunk=256).mails())
    assert sorted(str(email.message_from_bytes(m.raw)["Subject"]) for m in mails) == sorted(subjects)
    assert all(m.cr == name.endswith(".mac") for m in mails)
    lf = [m.raw.rstrip(b"\n") for m in Reader((EMAIL_FOLDER / "testmbox").open("rb"), 0).mails()]
    if name == "testmbox":
        box = mailbox.mbox(EMAIL_FOLDER / name, create=False)
        assert lf == [unquote(box.get_bytes(k), "mboxrd").rstrip(b"\n") for k in box.iterkeys()]
        box.close()
    elif name.startswith("testmbox"):
        ends = [m.raw.replace(b"\r\n", b"\n").rstrip(b"\n") for m in mails]
        ends[0] = re.sub(rb"\nContent-Length: \d+\nLines: \d+\n", b"\n", ends[0], count=1)
        assert ends == lf
