"""One record never blocks the rest: unencodable text is repaired, an unrenderable record is quarantined, and
no library exception's message (which may quote a record) reaches any output."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from memex import registry
from memex.errors import describe_exc
from memex.records import canonical_json
from memex.runner import poll
from pollers.email.imap import session as imap_session
from pollers.imessage import samples as imessage_samples
from tests.conftest import file_objects, read_log, run_cli, wait_until, write_config
from tests.core.test_heartbeat import Pings, pings
from tests.email.test_imap import PASSWORD_ENV, source_table
from tests.email.test_maildir import deliver, mail, make_maildir
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server

__all__ = ["dovecot_server", "pings"]  # the `dovecot` and `pings` fixtures

UTF7_BODY = (
    b"From: a@example.com\nSubject: utf7 body\nMessage-ID: <u7@example.com>\nContent-Type: text/plain; charset=utf-7\n\nhi +2AA- there\n"
)
UTF7_SUBJECT = b"From: a@example.com\nSubject: =?utf-7?Q?+2AA-?=\nMessage-ID: <u7s@example.com>\n\nbody\n"


def test_lone_surrogates_become_replacement_characters_and_pairs_their_character() -> None:
    """canonical_json never raises on text a lax decoder produced: lone surrogates -> U+FFFD, a pair -> its character."""
    assert canonical_json({"t": "a\ud800b", "p": "\ud83d\ude00"}) == '{"p":"😀","t":"a\ufffdb"}\n'.encode()


def records(store: Path) -> dict[str, dict[str, Any]]:
    """native id -> record in a file store."""
    return {json.loads(b)["native_id"]: json.loads(b) for k, b in file_objects(store).items() if k.endswith(".json")}


def test_maildir_mail_decoding_to_lone_surrogates_is_stored_and_the_rest_goes_on(tmp_path: Path) -> None:
    """utf-7 '+2AA-' in a body, in an encoded-word Subject and a file name that is not UTF-8: all stored, then the next mail too."""
    root = make_maildir(tmp_path / "Maildir")
    deliver(root, "1.M1P1.host", UTF7_BODY)
    deliver(root, "2.M2P1.host", UTF7_SUBJECT)
    bad_name = os.fsencode(root / "new") + b"/3.M3P1.h\xffst"
    with open(bad_name, "wb") as fh:
        fh.write(mail("latin-name"))
    deliver(root, "4.M4P1.host", mail("after"))
    cfg = write_config(tmp_path, {"md": {"type": "maildir", "path": str(root), "settle_seconds": 0}})
    out = run_cli("poll", "md", config=cfg)
    assert out.returncode == 0, out.stderr
    got = records(tmp_path / "state" / "store")
    assert set(got) == {"u7@example.com", "u7s@example.com", "mlatin-name@example.com", "mafter@example.com"}
    assert "\ufffd" in got["u7@example.com"]["text"] and "\ufffd" in got["u7s@example.com"]["extra"]["subject"]
    assert "\ufffd" in got["mlatin-name@example.com"]["extra"]["maildir_key"]


def test_imap_mail_decoding_to_lone_surrogates_does_not_stop_the_mailboxes_after_it(tmp_path: Path, dovecot: Dovecot,
                                                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The utf-7 mail in the first mailbox is stored; the second mailbox is reached and stored in the same poll."""
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    monkeypatch.setattr(imap_session, "BACKOFF", ())
    user = dovecot.new_user()
    with dovecot.session(user) as conn:
        conn.create("Archive")
    dovecot.append(user, "Archive", UTF7_BODY)
    dovecot.append(user, "INBOX", mail("inbox"))
    cfg = memex_config.load(write_config(tmp_path, {"mail": source_table(dovecot, user, mailboxes=["Archive", "INBOX"])}))
    result = poll(cfg, "mail")
    assert (result.status, result.new) == ("ok", 2), result.error
    assert set(records(tmp_path / "state" / "store")) == {"u7@example.com", "minbox@example.com"}


def test_a_record_that_cannot_be_serialised_is_quarantined_with_its_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A poller handing over a record JSON cannot hold: that record goes to quarantine (raw kept), the others are stored, the cursor moves on."""
    monkeypatch.setitem(registry.BUILTIN, "fake", "tests.core.fake_poller:make")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"count": 4, "unserialisable": [2]}))
    cfg = memex_config.load(write_config(tmp_path, {"f": {"type": "fake", "spec": str(spec)}}))
    result = poll(cfg, "f")
    assert (result.status, result.new, result.quarantined, result.positions_after) == ("ok", 3, 1, {"n": 4})
    objects = file_objects(tmp_path / "state" / "store", prefix="quarantine/")
    meta = json.loads(objects["quarantine/f/m2.json"])
    assert meta["reason"] == "cannot render the record (TypeError)" and b"body 2" in objects["quarantine/f/m2.raw"]
    assert [e["native_id"] for e in read_log(tmp_path / "state", "f") if e.get("event") == "record.quarantined"] == ["m2"]


def test_describe_exc_never_carries_the_message() -> None:
    """The core's way to name an exception: type and code, never the text a library put in it."""
    try:
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.execute("INSERT INTO t VALUES (CAST(? AS TEXT))", (b"CANARY-q8 \xed\xa0\xbd",))
        conn.execute("SELECT x FROM t").fetchall()
    except sqlite3.Error as exc:
        assert "CANARY" in str(exc)  # the library quotes the column's text...
        assert "CANARY" not in describe_exc(exc) and describe_exc(exc).startswith("OperationalError")  # ...we never do
    else:
        pytest.fail("sqlite3 decoded invalid UTF-8")
    assert describe_exc(PermissionError(13, "Permission denied", "/secret/CANARY")) == "PermissionError: Permission denied"


def test_a_database_error_quoting_message_text_reaches_no_output(tmp_path: Path) -> None:
    """A chat.db row with invalid UTF-8 around a canary: the canary is in no stderr line, log line or heartbeat body."""
    import http.server
    import threading

    bodies: list[bytes] = []

    class Catch(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_a: Any) -> None:
            pass

        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self.send_response(200)
            self.end_headers()

        do_GET = do_POST

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Catch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 5, seed=1)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE message SET text = CAST(? AS TEXT) WHERE ROWID = 3", (b"CANARY-7f3a \xed\xa0\xbd secret",))
    conn.commit()
    conn.close()
    url = f"http://127.0.0.1:{server.server_address[1]}/ping/abc"
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db), "heartbeat_url": url}})
    try:
        out = run_cli("poll", "imessage", config=cfg)
    finally:
        server.shutdown()
    logs = (tmp_path / "state" / "logs" / "imessage.jsonl").read_text()
    assert "CANARY" not in out.stderr + out.stdout and "CANARY" not in logs
    assert all(b"CANARY" not in b for b in bodies)


def test_a_library_exception_quoting_a_record_reaches_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pings: Pings) -> None:
    """A poller's library raises with a record's text in its message (float('CANARY...')): the poll fails as an internal
    error named by type and place; the canary is in no console line, log line, heartbeat body or result field."""
    import io

    monkeypatch.setitem(registry.BUILTIN, "fake", "tests.core.fake_poller:make")
    monkeypatch.delenv("MEMEX_DEBUG", raising=False)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"count": 3, "mode": "library_quotes_the_record", "text": "CANARY-91c4 my secret words"}))
    try:
        float("CANARY-91c4")
    except ValueError as exc:
        assert "CANARY" in str(exc)  # the library does quote it
    cfg = memex_config.load(write_config(tmp_path, {"f": {"type": "fake", "spec": str(spec), "heartbeat_url": pings.url}}))
    console = io.StringIO()
    result = poll(cfg, "f", console=console)
    assert result.status == "error" and result.error is not None and result.error.startswith("internal error: ValueError at fake_poller.py")
    wait_until(lambda: len(pings.got) >= 2, 10, "the start and fail pings")
    logs = (tmp_path / "state" / "logs" / "f.jsonl").read_text()
    assert "ValueError" in logs
    outputs = [console.getvalue(), logs, json.dumps(result.log_fields()), *(body.decode() for _, _, body in pings.got)]
    assert not [o for o in outputs if "CANARY" in o]
