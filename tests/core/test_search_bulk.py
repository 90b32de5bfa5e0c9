"""A rebuild's rows, made by SQLite's JSON functions (:mod:`memex.search.bulk`), equal the Python path's.

The same records, in the same order, are added once through :meth:`SearchIndex.add` (``json.loads`` and
:func:`memex.search.rows.message_row`, what a poll does) and once through :meth:`SearchIndex.rebuild` (raw bytes into
SQLite); every table a search reads must come out the same, row ids included. The records cover every field of
every type the Python path reads, the records SQLite's parser refuses but Python reads, and messages sent at the
same millisecond."""

from __future__ import annotations

import json
import random
import sqlite3
import stat
from pathlib import Path
from typing import Any

from memex.search import bulk as staging
from memex.search.index import SearchIndex
from memex.search.rows import ID_SPREAD
from pollers.imessage import samples as imessage_samples
from tests.conftest import read_log, run_cli, write_config

FIELDS = ("source", "native_id", "text", "sent_at", "conversation", "sender", "extra", "attachments", "deleted")
ODD: list[Any] = [None, 7, 2.5, True, False, "", "x", [], ["a"], {}, {"id": "q"}]  # a value of each JSON type


def _shapes(rng: random.Random) -> list[dict[str, Any]]:
    """Records of every shape: well-formed ones of each source's kind, and each field given each wrong type."""
    out: list[dict[str, Any]] = []
    for i in range(300):
        mail = i % 3 == 0
        doc: dict[str, Any] = {
            "source": "mail" if mail else "chat", "native_id": f"n{i}", "type": "message", "text": f"hello w{i} lease",
            "sent_at": f"2024-0{1 + i % 9}-1{i % 10}T1{i % 10}:0{i % 6}:00{'.123' if i % 4 else ''}{'Z' if i % 5 else '+02:00'}",
            "conversation": {"id": f"c{i % 7}", "name": f"Group {i % 7}", "participants": ["+1555", "me", f"p{i}", "", 5]},
            "sender": {"id": f"p{i}" if i % 2 else None, "name": f"Pé {i}", "is_me": i % 2 == 0},
        }  # fmt: skip
        if mail:
            doc["extra"] = {"subject": f"Re: lease {i}", "to": [f"a{i}@x", 3, "b@x"], "cc": [] if i % 2 else ["c@x", ""],
                            "to_names": [f"Ann {i}", "", 3], "cc_names": [] if i % 2 else ["", "Cé"],
                            "references": [f"<r{i % 13}>", 5, ""], "in_reply_to": [f"n{i - 3}"]}  # fmt: skip
            if i % 4 == 0:
                doc["extra"]["search_text"] = f"html only w{i}"
            doc["reply_to"] = f"n{i - 6}" if i % 2 else None
        if i % 5 == 0:
            doc["attachments"] = [{"filename": f"IMG_{i}.jpg"}, {"filename": ""}, {"filename": 4}, "junk", {"id": "no name"},
                                  {"id": "fwd", "message": {"filenames": [f"in{i}.pdf", 7, "", "b.doc"]}}, {"message": [1]}]  # fmt: skip
        if i % 11 == 0:
            doc["deleted"] = True
        out.append(doc)
    for field in FIELDS:
        for value in ODD:
            doc = dict(out[len(out) % 300], native_id=f"odd-{field}-{len(out)}")
            doc[field] = value
            out.append(doc)
    for nested in ("to", "cc", "to_names", "cc_names", "references", "in_reply_to", "search_text"):
        for value in ODD:
            out.append(dict(out[0], native_id=f"extra-{nested}-{len(out)}", extra={nested: value, "subject": value}))
    for value in ODD:
        out.append(dict(out[1], native_id=f"people-{len(out)}", conversation={"participants": value, "id": value, "name": value}))
        out.append(dict(out[1], native_id=f"sender-{len(out)}", sender={"id": value, "name": value, "is_me": value}))
        out.append(dict(out[5], native_id=f"attach-{len(out)}", attachments=[{"filename": value}, value]))
        out.append(dict(out[5], native_id=f"inner-{len(out)}", attachments=[{"message": {"filenames": value}}, {"message": value}]))
        out.append(dict(out[3], native_id=f"reply-{len(out)}", reply_to=value))
    for i in range(40):  # the same millisecond: their ids collide and must move up exactly as the Python path moves them
        out.append(dict(out[2], native_id=f"same-{i}", sent_at="2024-05-05T05:05:05.005Z"))
    rng.shuffle(out)
    return out


def _stored(rng: random.Random) -> list[tuple[str, bytes]]:
    """The records as stored objects, plus objects only Python reads or nobody reads."""
    out = [(f"messages/{doc.get('source') if isinstance(doc.get('source'), str) and doc.get('source') else 'chat'}/"
            f"k{i:04d}.json", json.dumps(doc, ensure_ascii=i % 2 == 0).encode()) for i, doc in enumerate(_shapes(rng))]  # fmt: skip
    out += [
        ("messages/chat/nan.json", b'{"text": "not a number", "score": NaN, "sent_at": "2024-01-01T00:00:00Z"}'),  # Python only
        ("messages/chat/bom.json", b'\xef\xbb\xbf{"text": "with a BOM"}'),  # Python only
        ("messages/chat/latin1.json", '{"text": "caf\xe9"}'.encode("latin-1")),  # neither
        ("messages/chat/list.json", b'["not", "an", "object"]'),  # neither
        ("messages/chat/cut.json", b'{"text": "cut sh'),  # neither
    ]
    rng.shuffle(out)
    return out


def _tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The tables a search reads, once FTS5's index is checked against the rows it reads its words from."""
    db = sqlite3.connect(path)
    try:
        db.execute("INSERT INTO fts(fts, rank) VALUES('integrity-check', 1)")  # raises if a row's words are off
        return {
            "messages": db.execute("SELECT * FROM messages ORDER BY id").fetchall(),
            "fts": db.execute("SELECT rowid, * FROM fts ORDER BY rowid").fetchall(),
            "revisions": db.execute("SELECT * FROM revisions ORDER BY key").fetchall(),
            "links": db.execute("SELECT * FROM links ORDER BY ref, id").fetchall(),
        }
    finally:
        db.close()


def test_a_rebuild_makes_the_rows_the_python_path_makes(tmp_path: Path) -> None:
    """Every table a search reads is the same, row for row and id for id, whether the records went through
    ``json.loads`` and ``message_row`` or through SQLite's JSON functions; a type check, a recipient rule or an id
    clash resolved differently in SQL fails here."""
    stored = _stored(random.Random(5))
    records = [(key, doc) for key, body in stored if isinstance(doc := _python(body), dict)]
    assert len(records) == len(stored) - 3
    with SearchIndex(tmp_path / "a" / "index.sqlite") as index:
        assert index.add(records) == len(records)
    bulk = SearchIndex(tmp_path / "b" / "index.sqlite", fresh=True)
    try:
        assert bulk.rebuild(staging.staged(stored, bulk.path, iter([200, 250, 10**9]), chunk_size=64), None) == len(records)
    finally:
        bulk.close()
    python, sql = _tables(tmp_path / "a" / "index.sqlite"), _tables(tmp_path / "b" / "index.sqlite")
    assert len(python["messages"]) == len(records)
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["index.sqlite"]  # each staging file removed once used
    for table in python:
        assert sql[table] == python[table], table


def test_messages_at_one_millisecond_cost_a_few_queries_each_and_stay_near_their_time(tmp_path: Path) -> None:
    """2,000 records sent at one millisecond (a migration that gave every mail one Date), added in batches of 250 as
    a poll adds them: SQLite is asked about taken row ids a few times a record, not once per record already there
    (moving up one id at a time: about a million questions here, and billions at 100,000 mails); every id stays within
    64 ms of the records' time, and a rebuild of the same records gives each the same id."""
    sent, n = "2024-05-05T05:05:05.005Z", 2000
    stored = [(f"messages/chat/s{i}.json", json.dumps({"source": "chat", "native_id": f"s{i}", "text": f"same {i}",
                                                       "sent_at": sent}).encode()) for i in range(n)]  # fmt: skip
    records = [(key, json.loads(body)) for key, body in stored]
    asked = 0

    def count(statement: str) -> None:
        nonlocal asked
        asked += statement.startswith("SELECT") and "FROM messages WHERE id" in statement

    with SearchIndex(tmp_path / "a" / "index.sqlite") as index:
        index.db.set_trace_callback(count)
        for start in range(0, n, 250):
            index.add(records[start : start + 250])
        index.db.set_trace_callback(None)
    assert asked < 3 * n, asked
    python = _tables(tmp_path / "a" / "index.sqlite")["messages"]
    ms = 1714885505005
    assert len(python) == n and all(ms * ID_SPREAD <= row[0] < (ms + 64) * ID_SPREAD for row in python)
    bulk = SearchIndex(tmp_path / "b" / "index.sqlite", fresh=True)
    try:
        assert bulk.rebuild(staging.staged(stored, bulk.path, iter([300, 700, 10**9]), chunk_size=64), None) == n
    finally:
        bulk.close()
    assert _tables(tmp_path / "b" / "index.sqlite")["messages"] == python


def test_a_rebuild_applies_revisions_whichever_comes_first(tmp_path: Path) -> None:
    """A revision listed before its original (another source's order) and one after it both reach the original's
    row in a rebuild, as they do when a poll adds them: the edited text is searched, the deleted row marked."""
    orig = {"source": "chat", "native_id": "m1", "text": "old words", "sent_at": "2024-01-01T00:00:00Z"}
    other = dict(orig, native_id="m2", text="keep me")
    edit = {"source": "chat", "native_id": "m1", "text": "new words", "revision": {"kind": "edit", "at": "2024-01-02T00:00:00Z"}}
    delete = {"source": "chat", "native_id": "m2", "revision": {"kind": "delete", "at": "2024-01-03T00:00:00Z"}}
    stored = [
        ("revisions/chat/m1/r1.json", json.dumps(edit).encode()),
        ("messages/chat/m1.json", json.dumps(orig).encode()),
        ("messages/chat/m2.json", json.dumps(other).encode()),
        ("revisions/chat/m2/r2.json", json.dumps(delete).encode()),
    ]
    with SearchIndex(tmp_path / "a" / "index.sqlite") as index:
        index.add((key, json.loads(body)) for key, body in stored)
    bulk = SearchIndex(tmp_path / "b" / "index.sqlite", fresh=True)
    try:
        bulk.rebuild(staging.staged(stored, bulk.path, iter([3, 10])), None)
    finally:
        bulk.close()
    python, sql = _tables(tmp_path / "a" / "index.sqlite"), _tables(tmp_path / "b" / "index.sqlite")
    assert sql == python
    texts = {row[1]: (row[17], row[18], row[19]) for row in sql["messages"]}  # key: (text, edited, deleted)
    assert texts == {"messages/chat/m1.json": ("new words", 1, 0), "messages/chat/m2.json": ("keep me", 0, 1)}


def _python(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def test_a_rebuild_leaves_no_staging_file_and_removes_a_killed_ones(tmp_path: Path) -> None:
    """The staging files hold message text: a rebuild removes each once used, and one a killed rebuild left behind
    is removed by the next rebuild; the search folder then holds the index and its locks only (0600 files)."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 30, seed=41)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=config).returncode == 0
    folder = tmp_path / "state" / "search"
    leftover = folder / "index.sqlite.new.stage-7"
    leftover.write_bytes(b"text a killed rebuild staged")
    out = run_cli("index", "rebuild", config=config)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out.stderr
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert not [n for n in names if ".stage-" in n or n.endswith(".new")], names
    assert all(stat.S_IMODE((folder / n).stat().st_mode) == 0o600 for n in names), names


def test_a_rebuild_stopped_by_the_file_system_is_one_line_naming_the_file_and_the_live_index_stays(tmp_path: Path) -> None:
    """Something in the way of a staging file (here a folder where a killed rebuild's file would be) stops the
    rebuild with one line naming it and what to do, exit 1, never "internal error"; the index searches kept answers
    from the live file, and the new file is gone."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 20, seed=43)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=config).returncode == 0
    folder = tmp_path / "state" / "search"
    before = run_cli("search", "--json", "*", config=config)
    (folder / "index.sqlite.new.stage-0").mkdir()
    out = run_cli("index", "rebuild", config=config)
    assert out.returncode == 1 and out.stdout == "", out.stderr
    line = out.stderr.strip()
    assert "\n" not in line and "index.sqlite.new.stage-0" in line and "memex index rebuild" in line, line
    assert "internal" not in line.lower() and "Traceback" not in out.stderr
    assert not (folder / "index.sqlite.new").exists()
    assert run_cli("search", "--json", "*", config=config).stdout == before.stdout


def test_an_index_of_another_format_says_to_rebuild_and_polls_keep_their_journal_until_then(tmp_path: Path) -> None:
    """An index an older memex made (another ``user_version``) is never written into: a search is one line naming
    the file and `memex index rebuild` (exit 1); a poll stores its messages, warns with that line and keeps its
    journal; the rebuild then makes the index anew from the store and the next poll empties the journal."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 10, seed=45)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=config).returncode == 0
    index = tmp_path / "state" / "search" / "index.sqlite"
    con = sqlite3.connect(index)
    con.execute("PRAGMA user_version = 1")
    con.close()
    out = run_cli("search", "*", config=config)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and str(index) in out.stderr, out.stderr
    assert "memex index rebuild" in out.stderr and "Traceback" not in out.stderr
    imessage_samples.append(db, 5, seed=46)
    polled = run_cli("poll", "imessage", config=config)
    assert polled.returncode == 0, polled.stderr
    warned = [e for e in read_log(tmp_path / "state", "imessage") if e["event"] == "search.index_failed"]
    assert warned and "memex index rebuild" in warned[-1]["reason"]
    journal = tmp_path / "state" / "search" / "pending" / "imessage.poll.keys"
    assert len(journal.read_text().splitlines()) == 5
    assert run_cli("index", "rebuild", config=config).returncode == 0
    assert run_cli("poll", "imessage", config=config).returncode == 0
    assert journal.stat().st_size == 0
    assert len(run_cli("search", "--json", "*", config=config).stdout.split('"native_id"')) == 16  # 15 messages
