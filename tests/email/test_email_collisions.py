"""Different mails that share a Message-ID are both kept; the same mail seen twice stays one object."""

from __future__ import annotations

import json
from pathlib import Path

from memex import config as memex_config
from memex.runner import poll
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
