"""``memex search``, ``memex show`` and ``memex index``, through the CLI: every operator, the index kept in step by
polls and backfills (a crash between the store's commit and the index update is repaired by the next run), edits
and unsends, and an index rebuilt from S3 on a second host answering as the first host's does."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, Gate, file_objects, read_log, run_cli, s3_objects, write_config
from tests.imessage.test_imessage_edits import EDITED, NS
from tests.imessage.test_imessage_edits import _edit as edit


def mail(msgid: str, sender: str, to: str, subject: str, date: str, body: str, *, refs: str = "", attachment: str = "") -> bytes:
    """One RFC 822 mail; with ``attachment``, a multipart/mixed one carrying a small file of that name."""
    head = f"From: {sender}\nTo: {to}\nSubject: {subject}\nDate: {date}\nMessage-ID: <{msgid}>\n"
    if refs:
        head += f"In-Reply-To: <{refs}>\nReferences: <{refs}>\n"
    if not attachment:
        return (head + f"\n{body}\n").encode()
    return (head + 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: text/plain\n\n'
            f"{body}\n--b\nContent-Type: image/jpeg\nContent-Disposition: attachment; filename=\"{attachment}\"\n"
            "Content-Transfer-Encoding: base64\n\n/9j/4AAQ\n--b--\n").encode()  # fmt: skip


MAILS = {
    "lease1@example.com": mail("lease1@example.com", "Anna Berg <anna@example.com>", "me@example.org", "Lease renewal",
                               "Mon, 10 Mar 2025 09:00:00 +0000", "About the lease for the flat on Elm street"),
    "lunch@example.net": mail("lunch@example.net", "Bob <bob@example.net>", "anna@example.com", "Lunch",
                              "Fri, 02 May 2025 12:00:00 +0000", "lunch on friday? bring the pictures", attachment="beach.jpg"),
    "lease2@example.com": mail("lease2@example.com", "Anna Berg <anna@example.com>", "me@example.org", "Re: Lease renewal",
                               "Sun, 01 Jun 2025 18:30:00 +0000", "signed the leasehold papers", refs="lease1@example.com"),
    "ny@example.com": mail("ny@example.com", "carol@example.com", "me@example.org", "NY", "Tue, 31 Dec 2024 23:00:00 +0000",
                           "happy new year"),
}  # fmt: skip


def maildir(root: Path) -> Path:
    """A Maildir holding :data:`MAILS`."""
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for n, raw in enumerate(MAILS.values()):
        (root / "new" / f"{1700000000 + n}.M{n}.host").write_bytes(raw)
    return root


def sources(tmp_path: Path, count: int = 40) -> dict[str, dict[str, Any]]:
    """A Maildir source ``md`` and an iMessage source (a sample chat.db of ``count`` messages)."""
    db = tmp_path / "chat.db"
    if not db.exists():
        imessage_samples.build(db, count, seed=23)
    return {"md": {"type": "maildir", "path": str(maildir(tmp_path / "Maildir")), "settle_seconds": 0},
            "imessage": {"type": "imessage", "db": str(db)}}  # fmt: skip


def ids(config: Path, *query: str, n: int = 1000) -> list[str]:
    """The native IDs a search answers, in its order."""
    out = run_cli("search", "--json", "-n", str(n), *query, config=config)
    assert out.returncode == 0, out.stderr
    return [r["native_id"] for r in json.loads(out.stdout)]


def records(store: Path) -> dict[str, dict[str, Any]]:
    """Every stored record of a file store, key to record."""
    return {k: json.loads(v) for k, v in file_objects(store, prefix="").items() if k.endswith(".json")}


def test_each_operator_finds_what_it_says(tmp_path: Path) -> None:
    """Words, phrases, prefix*, -term, from:, to:, subject:, attachment:, in: (thread id or chat name), source:,
    has:attachment, after:/before:, is:me and id: each answer exactly the messages they describe, newest first;
    the plain output is one line per message; the index is a 0600 file in a 0700 folder."""
    config = write_config(tmp_path, sources(tmp_path))
    for source in ("md", "imessage"):
        assert run_cli("poll", source, config=config).returncode == 0
    index = tmp_path / "state" / "search" / "index.sqlite"
    assert stat.S_IMODE(index.stat().st_mode) == 0o600 and stat.S_IMODE(index.parent.stat().st_mode) == 0o700
    assert ids(config, "source:md") == ["lease2@example.com", "lunch@example.net", "lease1@example.com", "ny@example.com"]
    assert set(ids(config, "lease")) == {"lease1@example.com", "lease2@example.com"}  # body or subject
    assert set(ids(config, "leas*")) == {"lease1@example.com", "lease2@example.com"}
    assert ids(config, "leasehold") == ["lease2@example.com"]
    assert ids(config, '"lease for the flat"') == ["lease1@example.com"]
    assert ids(config, '"flat for the lease"') == []
    assert ids(config, "lease", "-signed") == ["lease1@example.com"]
    assert ids(config, "lease", "not", "signed") == ["lease1@example.com"]
    assert set(ids(config, "from:anna")) == set(ids(config, "from:anna@example.com")) == {"lease1@example.com", "lease2@example.com"}
    assert ids(config, 'from:"Anna Berg"', "papers") == ["lease2@example.com"]
    assert ids(config, "to:anna") == ["lunch@example.net"]
    assert ids(config, "subject:lunch") == ["lunch@example.net"]
    assert ids(config, "attachment:beach") == ids(config, "has:attachment", "source:md") == ["lunch@example.net"]
    assert ids(config, "in:lease1@example.com") == ["lease2@example.com", "lease1@example.com"]
    assert ids(config, "after:2025-04-01", "source:md") == ["lease2@example.com", "lunch@example.net"]
    assert ids(config, "before:2025-01-01", "source:md") == ["ny@example.com"]
    assert ids(config, "after:2025-03-10", "before:2025-03-11") == ["lease1@example.com"]
    assert ids(config, "id:ny@example.com") == ["ny@example.com"]
    stored = records(tmp_path / "state" / "store")
    messages = [d for k, d in stored.items() if k.startswith("messages/imessage/")]
    mine = {d["native_id"] for d in messages if d["sender"]["is_me"]}
    family = {d["native_id"] for d in messages if d["conversation"]["name"] == "Family"}
    assert mine and family and set(ids(config, "is:me")) == mine
    assert set(ids(config, "in:Family")) == family
    assert set(ids(config, "in:Family", "in:lease1@example.com")) == family | {"lease1@example.com", "lease2@example.com"}
    assert set(ids(config, "source:md", "source:imessage")) == set(ids(config, "*")) == {d["native_id"] for d in messages} | set(MAILS)
    assert len(ids(config, "*", n=3)) == 3
    ranked = ids(config, "--rank", "lease")
    assert ranked[0] == "lease1@example.com"  # "lease" in its subject and body: the better match, though older
    out = run_cli("search", "from:anna", config=config)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.splitlines() == ["2025-06-01 18:30  md  lease1@example.com  Anna Berg  signed the leasehold papers",
                                       "2025-03-10 09:00  md  lease1@example.com  Anna Berg  About the lease for the flat on Elm street"]  # fmt: skip


@pytest.mark.parametrize(("query", "says"), [
    (["foo:bar"], "unknown operator foo:"), (["after:2025-13-01"], "after:2025-13-01: not a date"),
    (['"unclosed'], "unclosed quote"), (["has:pictures"], "has:pictures: unknown"), (["is:starred"], "is:starred: unknown"),
    (["a", "OR"], "OR needs a term after it"), (["!!!"], "no letter or digit"), (["(subject:patch"], "unclosed parenthesis"),
    (["lease", "-n", "5"], "-n after the query: options go first"),
])  # fmt: skip
def test_a_query_memex_cannot_read_is_one_line_and_exit_2(tmp_path: Path, query: list[str], says: str) -> None:
    """Each malformed query is refused before the index is opened: one stderr line saying why, exit 2, no traceback."""
    config = write_config(tmp_path, {})
    out = run_cli("search", *query, config=config)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and says in out.stderr and "Traceback" not in out.stderr


def test_no_index_yet_says_how_to_build_one(tmp_path: Path) -> None:
    """Searching before any poll or rebuild: one line naming `memex index rebuild`, exit 1."""
    config = write_config(tmp_path, {})
    out = run_cli("search", "anything", config=config)
    assert out.returncode == 1 and "memex index rebuild" in out.stderr and out.stderr.count("\n") == 1


def test_show_prints_a_message_with_its_attachments_and_revisions(tmp_path: Path) -> None:
    """`memex show` by native ID or key: the header lines, the attachment list, the text; --json the record itself."""
    config = write_config(tmp_path, sources(tmp_path))
    assert run_cli("poll", "md", config=config).returncode == 0
    out = run_cli("show", "lunch@example.net", config=config)
    assert out.returncode == 0, out.stderr
    assert "subject:      Lunch" in out.stdout and "attachment:   beach.jpg (image/jpeg" in out.stdout
    assert "lunch on friday? bring the pictures" in out.stdout
    key = json.loads(run_cli("search", "--json", "beach", config=config).stdout)[0]["key"]
    shown = json.loads(run_cli("show", "--json", key, config=config).stdout)
    assert shown["key"] == key and shown["record"]["native_id"] == "lunch@example.net" and shown["revisions"] == []
    out = run_cli("show", "nobody@nowhere", config=config)
    assert out.returncode == 2 and "no stored message has the native ID" in out.stderr


def test_an_edit_makes_the_old_text_unfindable_and_an_unsend_hides_the_message(tmp_path: Path) -> None:
    """After an edit only the latest version's text is found (not the original, not an earlier edit); an unsent
    message is left out unless the query says is:deleted; `memex show` lists the revisions; a rebuild answers the same."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 6, seed=24)
    edited = edit(db, 3, text="zebra crossing plan", attributedBody=None)
    unsent = edit(db, 4, text="walrus tusk story", attributedBody=None)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=config).returncode == 0
    assert ids(config, "zebra") == [edited] and ids(config, "walrus") == [unsent]
    edit(db, 3, text="Edited message", date_edited=690513494 * NS, message_summary_info=EDITED)
    edit(db, 4, text=None, attributedBody=None, date_retracted=690513600 * NS)
    assert run_cli("poll", "imessage", config=config).returncode == 0
    assert ids(config, "zebra") == [] and ids(config, '"Edit 2"') == []
    assert ids(config, '"edited message"') == [edited] == ids(config, "is:edited")
    assert ids(config, "walrus") == [] and ids(config, "walrus", "is:deleted") == [unsent] == ids(config, "is:deleted")
    out = run_cli("show", edited, config=config)
    assert "zebra crossing plan" in out.stdout and "revisions (3):" in out.stdout and "edit: Edited message" in out.stdout
    assert run_cli("index", "rebuild", config=config).returncode == 0  # the same answers from the store alone
    assert ids(config, "zebra") == [] and ids(config, '"edited message"') == [edited] and ids(config, "is:deleted") == [unsent]


def test_a_crash_between_the_store_commit_and_the_index_update_is_repaired_by_the_next_poll(tmp_path: Path) -> None:
    """A poll killed (SIGKILL) after its records and cursor are committed but before the index is updated leaves its
    journal; the next poll, with nothing new to fetch, adds those records from the store and empties the journal."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 10, seed=25)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=config).returncode == 0
    imessage_samples.append(db, 20, seed=26)
    gate = Gate(tmp_path, 1)
    env = gate.env()
    env["MEMEX_TEST_HOLD"] = f"index:{gate.path}"  # memex.hold: pause after the commit, before the index update
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(config), "poll", "imessage"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        assert gate.wait_held(proc) == proc.pid
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(60)
    state = tmp_path / "state"
    assert json.loads((state / "cursors.json").read_text())["sources"]["imessage"]["cursor"]["rowid"] == 30  # committed
    journal = state / "search" / "pending" / "imessage.poll.keys"
    assert len(journal.read_text().splitlines()) == 20 and stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert len(ids(config, "*")) == 10  # the index missed the 20
    status = json.loads(run_cli("index", "status", "--json", config=config).stdout)
    assert [(r["indexed"], r["in_store"], r["behind"], r["pending"]) for r in status] == [(10, 30, 20, 20)]
    assert run_cli("poll", "imessage", config=config).returncode == 0
    assert read_log(state, "imessage")[-1]["status"] == "idle"
    assert journal.stat().st_size == 0  # emptied (kept for the next append)
    stored = {d["native_id"] for k, d in records(state / "store").items() if k.startswith("messages/")}
    assert len(stored) == 30 and set(ids(config, "*")) == stored
    status = json.loads(run_cli("index", "status", "--json", config=config).stdout)
    assert [(r["indexed"], r["behind"], r["pending"]) for r in status] == [(30, 0, 0)]


def test_a_backfill_keeps_the_index_in_step(tmp_path: Path) -> None:
    """`memex backfill` adds what it stores to the index as it checkpoints, like a poll."""
    config = write_config(tmp_path, sources(tmp_path, 25))
    assert run_cli("backfill", "imessage", config=config).returncode == 0
    stored = {d["native_id"] for k, d in records(tmp_path / "state" / "store").items() if k.startswith("messages/")}
    assert len(stored) == 25 and set(ids(config, "*")) == stored


QUERIES = (["*"], ["lease"], ["from:anna"], ["is:me"], ["in:Family"], ["has:attachment"], ["after:2025-01-01"], ["movie", "-park"])


def test_an_index_rebuilt_from_s3_on_a_second_host_answers_as_the_first(tmp_path: Path, s3_endpoint: str, s3_bucket: str) -> None:
    """Host A polls into S3 (its index kept in step); host B, with only the bucket and its own state folder, sees how
    far behind it is, rebuilds (listing paginated, reads in parallel) and then answers every query as A does."""
    store = {"url": f"s3://{s3_bucket}/idx", "endpoint_url": s3_endpoint}
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    config_a = write_config(first, sources(tmp_path, 60), store=store)
    config_b = write_config(second, sources(tmp_path), store=store)
    for source in ("md", "imessage"):
        assert run_cli("poll", source, config=config_a).returncode == 0
    assert len(s3_objects(s3_endpoint, s3_bucket, "idx/messages/")) >= 64
    status = json.loads(run_cli("index", "status", "--json", config=config_b).stdout)
    assert {r["source"]: (r["indexed"], r["behind"]) for r in status} == {"imessage": (0, 60), "md": (0, 4)}
    out = run_cli("index", "rebuild", "--workers", "8", config=config_b)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out.stderr
    status = json.loads(run_cli("index", "status", "--json", config=config_b).stdout)
    assert {r["source"]: (r["indexed"], r["behind"]) for r in status} == {"imessage": (60, 0), "md": (4, 0)}
    for query in QUERIES:
        answer = run_cli("search", "--json", "-n", "500", *query, config=config_a)
        assert answer.returncode == 0 and json.loads(answer.stdout)
        assert json.loads(run_cli("search", "--json", "-n", "500", *query, config=config_b).stdout) == json.loads(answer.stdout)


def test_messages_sent_at_the_same_moment_are_each_indexed_once(tmp_path: Path) -> None:
    """Forty mails with one Date header (row ids are time-ordered, so they contend for one millisecond's ids), and
    one without a date: a poll indexes each once, a rebuild the same, and all come back."""
    root = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True)
    for n in range(40):
        raw = mail(f"same{n}@example.com", "a@example.com", "b@example.com", "same", "Tue, 01 Nov 2022 10:00:00 +0000", f"moment {n}")
        (root / "new" / f"{1700000000 + n}.M{n}.host").write_bytes(raw)
    (root / "new" / "1700000099.M99.host").write_bytes(b"From: a@example.com\nSubject: undated\nMessage-ID: <undated@x>\n\nmoment\n")
    config = write_config(tmp_path, {"md": {"type": "maildir", "path": str(root), "settle_seconds": 0}})
    assert run_cli("poll", "md", config=config).returncode == 0
    expected = {f"same{n}@example.com" for n in range(40)} | {"undated@x"}
    found = ids(config, "moment")
    assert len(found) == 41 and set(found) == expected and found[-1] == "undated@x"  # no time: last
    assert run_cli("index", "rebuild", config=config).returncode == 0
    assert ids(config, "moment") == found


def test_duckdb_reads_the_bucket_with_no_memex_code(tmp_path: Path, seaweed_endpoint: str) -> None:
    """docs/searching.md's DuckDB path on SeaweedFS: memex polls into the bucket, then DuckDB's `read_json` over
    `messages/*/*.json` (the .eml blobs and revisions left out) counts what each source stored and reads a record."""
    import importlib.util

    import duckdb

    from tests.servers.seaweed import create_bucket

    create_bucket(seaweed_endpoint, "duck")
    config = write_config(tmp_path, sources(tmp_path, 30), store={"url": "s3://duck/idx", "endpoint_url": seaweed_endpoint})
    for source in ("md", "imessage"):
        assert run_cli("poll", source, config=config).returncode == 0
    spec = importlib.util.find_spec("duckdb_ext")
    assert spec is not None and spec.submodule_search_locations is not None
    (httpfs,) = Path(next(iter(spec.submodule_search_locations))).glob(f"extensions/v{duckdb.__version__}/*/httpfs.duckdb_extension")
    con = duckdb.connect()
    con.execute(f"LOAD '{httpfs}'")
    con.execute(f"CREATE SECRET (TYPE s3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1', "
                f"ENDPOINT '{seaweed_endpoint.split('://')[1]}', URL_STYLE 'path', USE_SSL false)")  # fmt: skip
    table = "read_json('s3://duck/idx/messages/*/*.json', format = 'newline_delimited', union_by_name = true)"
    assert con.execute(f"SELECT source, count(*) FROM {table} GROUP BY ALL ORDER BY ALL").fetchall() == [("imessage", 30), ("md", 4)]
    (row,) = con.execute(f"SELECT sender.name, extra.subject, text FROM {table} WHERE native_id = 'lunch@example.net'").fetchall()
    assert row == ("Bob", "Lunch", "lunch on friday? bring the pictures")
