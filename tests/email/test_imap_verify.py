"""``memex verify`` on an IMAP source against a real Dovecot: the UIDs up to the cursor are compared with the index,
--repair fetches again what is missing or damaged, and a renumbered mailbox (new UIDVALIDITY) is reported, not
"repaired" with the mails that now have its old UIDs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memex import config as memex_config
from memex.records import message_key
from memex.registry import make_poller
from memex.runner import poll
from memex.state.backend import cursor_store
from pollers.email.mail.render import raw_id
from tests.conftest import file_objects, run_cli, write_config
from tests.email.test_imap import env_password, mail, no_backoff, source_table
from tests.servers.dovecot import Dovecot, dovecot_server, quote

__all__ = ["dovecot_server", "env_password", "no_backoff"]  # fixtures

NO_ID = mail("no-id", msgid=None)  # keyed by the hash of its bytes as IMAP hands them over (CRLF)


def _verify(cfg_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``memex verify mail --json ARGS`` as a command: its exit code and the source's part of the report."""
    out = run_cli("verify", "mail", "--json", *args, config=cfg_path)
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, json.loads(out.stdout)["sources"]["mail"]


def _config(tmp_path: Path, dovecot: Dovecot, user: str, mailboxes: list[str]) -> tuple[Path, memex_config.Config]:
    """A config with one imap source ``mail`` reading ``mailboxes``: its path, and the config loaded."""
    path = write_config(tmp_path, {"mail": source_table(dovecot, user, mailboxes=mailboxes)})
    return path, memex_config.load(path)


def test_verify_compares_the_uids_up_to_the_cursor_and_repair_restores_and_replaces(
    tmp_path: Path, dovecot: Dovecot, env_password: None
) -> None:
    """Every mail up to each mailbox's cursor is listed by its native ID (the Message-ID from the header block, or
    the hash of the whole mail when it has none); a mail that arrived after the poll is not expected. A lost record
    is reported missing (exit 1) with where it is; --repair stores it as the poll did (the same bytes) and replaces
    a damaged record and a damaged .eml; nothing is deleted and the next verify exits 0; no mail is marked \\Seen."""
    user = dovecot.new_user()
    for i in range(3):
        dovecot.append(user, "INBOX", mail(i))
    dovecot.append(user, "INBOX", NO_ID)
    for i in range(3, 5):
        dovecot.append(user, "Work", mail(i))
    cfg_path, cfg = _config(tmp_path, dovecot, user, ["INBOX", "Work"])
    assert poll(cfg, "mail").new == 6
    dovecot.append(user, "INBOX", mail("late"))  # past the cursor: not polled yet, not expected in the index

    poller = make_poller(cfg.source("mail"))
    try:
        listed = list(poller.inventory(cursor_store(cfg).cursor("mail")))  # type: ignore[attr-defined]
    finally:
        poller.close()
    no_id = raw_id(NO_ID)
    assert sorted(e.native_id for e in listed) == sorted([f"m{i}@example.com" for i in range(5)] + [no_id])
    code, report = _verify(cfg_path)
    assert (code, report["inventory"], report["listed"], report["unchecked"]) == (0, "checked", 6, [])

    store = cfg.state_dir / "store"
    before = set(file_objects(store, ""))
    lost = store / message_key("mail", no_id)
    sound = lost.read_bytes()
    lost.unlink()
    (store / message_key("mail", "m1@example.com")).write_bytes(b'{"cut short')
    eml = store / message_key("mail", "m3@example.com", ".eml")
    eml_sound = eml.read_bytes()
    eml.write_bytes(b"")
    code, report = _verify(cfg_path)
    assert code == 1 and report["damage"]["missing_from_source"] == 1
    assert report["examples"]["missing_from_source"][0]["native_id"] == no_id
    assert report["examples"]["missing_from_source"][0]["ref"].startswith("INBOX;UIDVALIDITY=")
    assert report["damage"]["not_json"] == 1 and report["damage"]["empty"] == 1

    code, report = _verify(cfg_path, "--repair")
    assert code == 0 and report["repaired"] == {"restored": 1, "replaced": 2}, report
    assert lost.read_bytes() == sound and eml.read_bytes() == eml_sound
    assert json.loads((store / message_key("mail", "m1@example.com")).read_bytes())["native_id"] == "m1@example.com"
    assert set(file_objects(store, "")) >= before
    assert _verify(cfg_path)[0] == 0
    with dovecot.session(user) as conn:
        for box in ("INBOX", "Work"):
            conn.select(quote(box), readonly=True)
            _, flags = conn.uid("FETCH", "1:*", "(FLAGS)")
            assert all(b"\\Seen" not in f for f in flags if isinstance(f, bytes)), flags


def test_a_mailbox_renumbered_since_the_cursor_is_reported_and_not_repaired_with_other_mails(
    tmp_path: Path, dovecot: Dovecot, env_password: None
) -> None:
    """Work is deleted and recreated after the poll: its UIDs 1-3 now name three other mails. verify says the
    mailbox was renumbered and compares nothing of it (no false "missing"); --repair stores none of the new mails
    under the old UIDs' place, and the other mailbox is still compared."""
    user = dovecot.new_user()
    for i in range(3):
        dovecot.append(user, "Work", mail(i))
    dovecot.append(user, "INBOX", mail("inbox"))
    cfg_path, cfg = _config(tmp_path, dovecot, user, ["INBOX", "Work"])
    assert poll(cfg, "mail").new == 4
    with dovecot.session(user) as conn:
        assert conn.delete(quote("Work"))[0] == "OK"
        assert conn.create(quote("Work"))[0] == "OK"
    for name in ("other-a", "other-b", "other-c"):
        dovecot.append(user, "Work", mail(name))
    (cfg.state_dir / "store" / message_key("mail", "m1@example.com")).unlink()

    code, report = _verify(cfg_path, "--repair")
    assert code == 0, report
    assert report["listed"] == 1 and report["damage"]["missing_from_source"] == 0 and report["repaired"] == {}
    assert len(report["unchecked"]) == 1 and "'Work'" in report["unchecked"][0] and "UIDVALIDITY" in report["unchecked"][0]
    stored = file_objects(cfg.state_dir / "store", "messages/")
    assert not any("other" in key for key in stored), sorted(stored)
    out = run_cli("verify", "mail", config=cfg_path)
    assert out.returncode == 0 and "not checked: mailbox 'Work'" in out.stdout, out.stdout
