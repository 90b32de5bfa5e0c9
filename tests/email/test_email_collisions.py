"""Different mails that share a Message-ID are both kept; the same mail seen twice stays one object."""

from __future__ import annotations

import email
import json
from pathlib import Path

import pytest

from memex import config as memex_config
from memex.runner import poll
from memex.store.collisions import collision_key
from pollers.email.mail.identity import legacy_fingerprint
from pollers.email.mail.render import render
from tests.conftest import file_objects, write_config
from tests.email.test_maildir import deliver, make_maildir

SHARED = "<1234@local.machine.example>"  # RFC 2822's own examples reuse this one


def _mail(sender: str, subject: str, body: str, received: str = "") -> bytes:
    return (f"{received}From: {sender}\nTo: x@example.com\nSubject: {subject}\nDate: Fri, 21 Nov 1997 09:55:06 -0600\n"
            f"Message-ID: {SHARED}\n\n{body}\n").encode()  # fmt: skip


def test_two_different_mails_with_one_message_id_are_both_stored_and_findable(tmp_path: Path) -> None:
    """RFC 2822's reused ID: the second, different mail is stored beside the first (~c<fingerprint>), with its .eml;
    the first mail seen again in another folder (other Received header) is a duplicate."""
    root = make_maildir(tmp_path / "Maildir")
    for sub in ("cur", "new", "tmp"):
        (root / ".Archive" / sub).mkdir(parents=True)
    first = _mail("john@example.com", "Saying Hello", "This is a message just to say hello.")
    second = _mail("mary@example.net", "Re: Saying Hello", "This is a reply to your hello.")
    again = _mail("john@example.com", "Saying Hello", "This is a message just to say hello.", received="Received: from relay\n")
    deliver(root, "1.M1P1.h", first)
    deliver(root, "2.M2P1.h", second)
    deliver(root / ".Archive", "3.M3P1.h", again)
    cfg = memex_config.load(write_config(tmp_path, {"md": {"type": "maildir", "path": str(root), "settle_seconds": 0,
                                                           "folders": ["INBOX", "Archive"]}}))  # fmt: skip
    result = poll(cfg, "md")
    assert (result.new, result.dup) == (2, 1), result.error
    objects = file_objects(tmp_path / "state" / "store")
    base = "messages/md/1234%40local.machine.example"
    records = {k: json.loads(v) for k, v in objects.items() if k.startswith(base) and k.endswith(".json")}
    assert len(records) == 2 and {r["native_id"] for r in records.values()} == {"1234@local.machine.example"}
    (other_key,) = [k for k in records if k != f"{base}.json"]
    assert other_key.startswith(f"{base}~c") and records[other_key]["extra"]["collision_of"] == f"{base}.json"
    assert {records[f"{base}.json"]["sender"]["id"], records[other_key]["sender"]["id"]} == {"john@example.com", "mary@example.net"}
    assert objects[f"{base}.eml"] in (first, again) and objects[other_key[: -len(".json")] + ".eml"] == second


DATA = Path(__file__).parent / "data"
# Pairs of real public mails that share a Message-ID and are different mails (tests/email/data/*/README.md).
PAIRS = {
    "to-cc": ("mikel_mail/example03.eml", "mikel_mail/example11.eml"),  # RFC 2822 A.1.3 / A.6.2: other To and Cc
    "cc-only": ("cpython_email/msg_01.txt", "cpython_email/msg_20.txt"),  # msg_20 adds three Cc lines, nothing else
    "from-to": ("mikel_mail/basic_email.eml", "mikel_mail/raw_email_with_at_display_name.eml"),  # more From/To
    "attachments": ("mikel_mail/attachment_content_disposition.eml", "mikel_mail/raw_email12.eml"),  # other parts
    "enclosed": ("flanker/enclosed.eml", "flanker/enclosed-broken-body.eml"),  # same text, other attached mail
}
TRANSPORT = (b"Received: from mx.example.org by imap.example.org; Mon, 1 Jan 2024 00:00:00 +0000\r\n"
             b"Return-Path: <bounce@example.org>\r\nDelivered-To: me@example.org\r\nX-Spam-Score: 0.1\r\n"
             b"DKIM-Signature: v=1; a=rsa-sha256; d=example.org; b=abc\r\nARC-Seal: i=1; a=rsa-sha256; b=def\r\n")  # fmt: skip


def _poll_folders(tmp_path: Path, folders: dict[str, list[bytes]]) -> tuple[int, int]:
    """Deliver ``folders`` (name -> mails) into one Maildir, poll it once; (new, dup)."""
    root = make_maildir(tmp_path / "Maildir")
    for folder, mails in folders.items():
        where = make_maildir(root if folder == "INBOX" else root / f".{folder}")
        for n, raw in enumerate(mails):
            deliver(where, f"{folder}{n}.M{n}P1.h", raw)
    cfg = memex_config.load(write_config(tmp_path, {"md": {"type": "maildir", "path": str(root), "settle_seconds": 0,
                                                           "folders": list(folders)}}))  # fmt: skip
    result = poll(cfg, "md")
    assert result.error is None, result.error
    return result.new, result.dup


def _records(tmp_path: Path) -> dict[str, dict[str, object]]:
    objects = file_objects(tmp_path / "state" / "store")
    return {k: json.loads(v) for k, v in objects.items() if k.endswith(".json")}


def _crlf_with_transport(raw: bytes) -> bytes:
    """The same mail as another server hands it over: CRLF line ends and its own transport headers on top."""
    return TRANSPORT + raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


@pytest.mark.parametrize("pair", list(PAIRS), ids=list(PAIRS))
def test_real_mails_sharing_an_id_that_differ_in_recipients_or_parts_are_both_kept(tmp_path: Path, pair: str) -> None:
    """Two real mails with one Message-ID that differ only in To/Cc (or From, or their parts) are two objects,
    the second beside the first with its own .eml; each seen again (other transport headers, CRLF) is a duplicate."""
    first, second = ((DATA / name).read_bytes() for name in PAIRS[pair])
    new, dup = _poll_folders(tmp_path, {"INBOX": [first, second], "Archive": [_crlf_with_transport(first), _crlf_with_transport(second)]})
    assert (new, dup) == (2, 2)
    records = _records(tmp_path)
    assert len(records) == 2 and len({r["native_id"] for r in records.values()}) == 1
    (other,) = [k for k, r in records.items() if "collision_of" in r["extra"]]  # type: ignore[operator]
    objects = file_objects(tmp_path / "state" / "store")
    assert objects[other[: -len(".json")] + ".eml"] in (second, _crlf_with_transport(second))


def test_a_sent_copy_with_bcc_and_the_delivered_copy_are_one_mail(tmp_path: Path) -> None:
    """Bcc is not part of a mail's identity: the sender's copy keeps it, the delivered copy lost it (RFC 5322 3.6.3)."""
    delivered = (DATA / "cpython_email" / "msg_20.txt").read_bytes()
    sent = delivered.replace(b"\nCc: ccc@zzz.org", b"\nBcc: secret@zzz.org\nCc: ccc@zzz.org", 1)
    assert sent != delivered
    assert _poll_folders(tmp_path, {"INBOX": [delivered], "Sent": [sent]}) == (1, 1)


def _legacy(raw: bytes) -> str:
    """The fingerprint memex stored before recipients and parts counted (From, Date, Subject, text)."""
    record = render(raw, "md")
    return legacy_fingerprint(record.sender["id"] or "", email.message_from_bytes(raw)["Date"], record.extra["subject"], record.text)


def _restore(store: Path, key: str, fingerprint: str, *, move_to: str | None = None) -> None:
    """Make the stored record at ``key`` look as an earlier memex wrote it: its fingerprint, its collision key."""
    path = store / key
    record = json.loads(path.read_bytes())
    record["extra"]["fingerprint"] = fingerprint
    path.chmod(0o600)
    path.write_text(json.dumps(record))
    if move_to is not None:
        (store / (key[: -len(".json")] + ".eml")).rename(store / (move_to[: -len(".json")] + ".eml"))
        path.rename(store / move_to)


def test_an_index_stored_under_the_earlier_fingerprint_rule_is_not_doubled(tmp_path: Path) -> None:
    """Records stored by an earlier memex (other fingerprints) are found again: the same mail from another folder is
    a duplicate (decided on the stored .eml by today's rule, even when the stored fingerprint can no longer be
    computed), an earlier collision at its old key is a duplicate, and a mail that differs only in Cc is new."""
    first = (DATA / "cpython_email" / "msg_01.txt").read_bytes()
    other_text = first.replace(b"\n\n", b"\n\nAnother body.\n", 1)  # the earlier rule kept this one apart too
    cc_only = (DATA / "cpython_email" / "msg_20.txt").read_bytes()
    assert _poll_folders(tmp_path, {"INBOX": [first, other_text]}) == (2, 0)
    store = tmp_path / "state" / "store"
    records = _records(tmp_path)
    (base,) = [k for k, r in records.items() if "collision_of" not in r["extra"]]  # type: ignore[operator]
    (collision,) = [k for k in records if k != base]
    _restore(store, base, "f" * 32)  # a fingerprint today's code cannot compute (the renderer changed since)
    _restore(store, collision, _legacy(other_text), move_to=collision_key(base, _legacy(other_text)))
    again = [_crlf_with_transport(first), TRANSPORT.replace(b"\r\n", b"\n") + other_text, cc_only]
    assert _poll_folders(tmp_path, {"INBOX": [], "Archive": again}) == (1, 2)
    after = _records(tmp_path)
    assert len(after) == 3 and collision_key(base, _legacy(other_text)) in after
    (new_key,) = set(after) - {base, collision_key(base, _legacy(other_text))}
    assert after[new_key]["extra"]["cc"] == ["ccc@zzz.org", "ddd@zzz.org", "eee@zzz.org"]  # type: ignore[index]
