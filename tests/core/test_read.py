"""The read model (:mod:`memex.read`): every question of its API answered on a real polled archive (a Maildir and a
sample iMessage chat.db polled into a file store and the search index), read-only, importing nothing that writes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from memex import config as memex_config
from memex.read import Archive, QueryError, ReadError, open_archive
from tests.conftest import ROOT, patience, run_cli, write_config
from tests.core.test_search import sources


def polled(tmp: Path, count: int) -> Path:
    """A config in ``tmp`` whose Maildir ``md`` and iMessage ``imessage`` (``count`` messages) were polled (its path)."""
    cfg = write_config(tmp, sources(tmp, count=count))
    for name in ("md", "imessage"):
        out = run_cli("poll", name, "--max-seconds", "600", config=cfg)
        assert out.returncode == 0, out.stderr
    return cfg


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A polled archive (:func:`polled`) of 60 chat messages and the search tests' mails."""
    return polled(tmp_path_factory.mktemp("read"), 60)


def _open(cfg: Path) -> Archive:
    return open_archive(memex_config.load(cfg))


def test_a_search_pages_newest_first_with_snippets_as_offsets(archive: Path) -> None:
    """search: the hits of a query newest first (oldest and rank too), paged by offset without repeats, the total
    counted, each snippet plain text whose highlights are offsets of the matched words."""
    a = _open(archive)
    page = a.search("lease", limit=1)
    assert page.total == 2 and len(page.hits) == 1
    hit = page.hits[0]
    assert hit.key == "messages/md/lease2%40example.com.json" and hit.source == "md" and hit.sender == "Anna Berg"
    assert hit.sent == datetime(2025, 6, 1, 18, 30, tzinfo=UTC) and hit.subject == "Re: Lease renewal"
    (body,) = a.search("leasehold").hits
    assert "\x02" not in body.snippet.text and [body.snippet.text[s:e] for s, e in body.snippet.highlights] == ["leasehold"]
    second = a.search("lease", limit=1, offset=1).hits
    assert [h.key for h in second] == ["messages/md/lease1%40example.com.json"]
    assert [h.key for h in a.search("lease", order="oldest").hits] == [second[0].key, hit.key]
    assert {h.key for h in a.search("lease", order="rank").hits} == {hit.key, second[0].key}
    assert a.search("lease", total=False).total is None


def _mail(maildir: Path, word: str, n: int) -> None:
    """Drop a mail holding ``word`` into ``maildir``'s new/ (the next poll of it stores it)."""
    raw = (f"From: Zoe <zoe@example.com>\r\nTo: me@example.com\r\nSubject: {word}\r\nDate: Mon, 2 Jun 2025 10:00:00 +0000\r\n"
           f"Message-ID: <{word}@example.com>\r\n\r\nabout the {word}\r\n")  # fmt: skip
    (maildir / "new" / f"{1800000000 + n}.M{n}.host").write_bytes(raw.encode())


def test_a_kept_connection_sees_what_a_poll_added_and_the_file_a_rebuild_swapped_in(tmp_path: Path) -> None:
    """The archive keeps a call's read-only connection for its next call (a server's next request), and that never
    costs freshness: a statement a call left mid-way ends with the call (kept, its snapshot would hide what a poll
    added since; the cursor is closed with its call), and after ``memex index rebuild`` swaps the file the next call
    reads the new one (here holding a mail a poll stored with the index off, which only the rebuild indexed)."""
    cfg = polled(tmp_path, 10)
    a = _open(cfg)
    with a.reading() as db:
        held = db.execute("SELECT id FROM messages")
        assert held.fetchone() is not None  # left mid-way, and kept alive past the call
    _mail(tmp_path / "Maildir", "zebrafinch", 1)
    assert run_cli("poll", "md", config=cfg).returncode == 0
    assert [h.subject for h in a.search("zebrafinch").hits] == ["zebrafinch"]
    unindexed = tmp_path / "off"
    unindexed.mkdir()
    off = write_config(unindexed, sources(tmp_path, count=10), state_dir=tmp_path / "state", search_index=False)
    _mail(tmp_path / "Maildir", "kingfisher", 2)
    assert run_cli("poll", "md", config=off).returncode == 0
    assert a.search("kingfisher").hits == []  # stored, not indexed
    assert run_cli("index", "rebuild", config=cfg).returncode == 0
    assert [h.subject for h in a.search("kingfisher").hits] == ["kingfisher"]
    with pytest.raises(sqlite3.ProgrammingError):  # a cursor used past its call is closed, never read from an old snapshot
        held.fetchall()
    a.close()


def test_bad_queries_and_a_missing_index_are_one_line_errors(archive: Path, tmp_path: Path) -> None:
    """A query that cannot be read is the parser's QueryError; an archive with no index yet is a ReadError naming
    `memex index rebuild`; an unknown order or grouping is a ReadError."""
    a = _open(archive)
    with pytest.raises(QueryError):
        a.search("(lease")
    with pytest.raises(ReadError, match="order"):
        a.search("lease", order="sideways")
    with pytest.raises(ReadError, match="by"):
        a.counts("*", "colour")
    empty = write_config(tmp_path, {})
    with pytest.raises(ReadError, match="memex index rebuild"):
        _open(empty).search("lease")


def test_counts_group_by_source_sender_month_day_and_conversation(archive: Path) -> None:
    """counts: per source (both sources, summing to the total), per sender (a name as label, the ID as key), per
    month and day (newest first), per conversation (titled, keyed by its conversation key), per person."""
    a = _open(archive)
    total = a.search("*", limit=1).total
    by_source = a.counts("*", "source")
    assert {c.key for c in by_source} == {"md", "imessage"} and sum(c.n for c in by_source) == total
    senders = a.counts("from:anna", "sender")
    assert [(c.label, c.key, c.n) for c in senders] == [("Anna Berg", "anna@example.com", 2)]
    months = [c.key for c in a.counts("source:md", "month")]
    assert months == sorted(months, reverse=True) and "2025-06" in months
    assert a.counts("source:md", "day")[0].key == "2025-06-01"
    (thread,) = a.counts("lease", "conversation")
    assert thread.n == 2 and thread.label == "Lease renewal" and thread.key is not None
    assert sum(c.n for c in a.counts("*", "person")) == total


def test_a_message_whole_with_attachments_and_bytes(archive: Path) -> None:
    """message: the record, its revisions, attachments listed with their store key; attachment(): its bytes from
    the store; an unknown key or attachment is None."""
    a = _open(archive)
    view = a.message("lunch@example.net")
    assert view is not None and view.key == "messages/md/lunch%40example.net.json"
    assert view.record["extra"]["subject"] == "Lunch" and view.revisions == [] and view.conversation is not None
    (att,) = view.attachments
    assert att.name == "beach.jpg" and att.mime == "image/jpeg" and att.in_mail and att.key is None
    blob = a.attachment(view.key, 0)
    assert blob is not None
    with blob.open() as fh:
        assert fh.read().startswith(b"\xff\xd8")  # the JPEG inside the stored mail, decoded
    assert a.attachment(view.key, 1) is None and a.message("messages/md/nothing.json") is None


def test_the_conversations_list_walks_the_newest_rows_yet_answers_as_grouping_every_message_would(archive: Path) -> None:
    """conversations(): the walk by newest row (issue 42's speed) lists each conversation once, ordered by its last
    (not deleted) message exactly as a GROUP BY over every message orders them, with that count; paged one at a
    time by cursor it gives the same list; one source's list is the grouping of that source's messages."""
    import sqlite3

    from memex.search import index_path

    a = _open(archive)
    db = sqlite3.connect(index_path(a.cfg.state_dir))
    grouped = "SELECT thread, count(*), max(id) FROM messages WHERE deleted = 0{} GROUP BY thread ORDER BY max(id) DESC"
    want = db.execute(grouped.format("")).fetchall()
    chats = db.execute(grouped.format(" AND source = 'imessage'")).fetchall()
    db.close()
    assert len(want) > 2
    listed = a.conversations(limit=1000)
    assert [(c.key, c.count, int(c.cursor)) for c in listed] == want
    paged, before = [], None
    while page := a.conversations(limit=1, before=before):
        paged += page
        before = page[-1].cursor
    assert [c.key for c in paged] == [c.key for c in listed]
    assert [(c.key, c.count, int(c.cursor)) for c in a.conversations(source="imessage", limit=1000)] == chats


def test_a_capped_search_total_is_exact_below_the_cap_and_says_more_above(archive: Path) -> None:
    """search(cap=N): the total counted no further than N: exact (``more`` False) when the matches are N or fewer,
    N with ``more`` when there are more; without a cap the total is the exact count, as before."""
    a = _open(archive)
    every = a.search("*", limit=1).total
    assert every is not None and every > 3
    assert (a.search("*", limit=1, cap=every).total, a.search("*", limit=1, cap=every).more) == (every, False)
    capped = a.search("*", limit=1, cap=3)
    assert (capped.total, capped.more, len(capped.hits)) == (3, True, 1)
    assert a.search("lease", cap=3).total == 2 and not a.search("lease", cap=3).more
    assert a.search("*", limit=1).more is False


def test_conversations_and_a_conversation_paged_both_ways(archive: Path) -> None:
    """conversations: every conversation, the latest first, filtered by source, paged by cursor; conversation: the
    latest page oldest to newest, then the pages before it back to the first, every message once; around a message."""
    a = _open(archive)
    listed = a.conversations(limit=100)
    assert len({c.key for c in listed}) == len(listed) and {c.source for c in listed} == {"md", "imessage"}
    lasts = [c.last.sent for c in listed if c.last is not None and c.last.sent is not None]
    assert len(lasts) == len(listed)
    first = a.conversations(limit=1)
    assert a.conversations(limit=1, before=first[0].cursor)[0].key == listed[1].key
    chats = a.conversations(source="imessage", limit=100)
    assert chats and all(c.source == "imessage" for c in chats)
    biggest = max(chats, key=lambda c: c.count)
    page = a.conversation(biggest.key, limit=3)
    assert page is not None and page.next_cursor is None and len(page.messages) == min(3, biggest.count)
    seen = [m.key for m in page.messages]
    while page.prev_cursor is not None:
        page = a.conversation(biggest.key, before=page.prev_cursor, limit=3)
        assert page is not None
        seen[0:0] = [m.key for m in page.messages]
    assert len(seen) == len(set(seen)) == biggest.count
    times = [m.sent for m in page.messages]
    assert times == sorted(times, key=lambda t: t or datetime.min.replace(tzinfo=UTC))
    forward = [m.key for m in page.messages]
    while page.next_cursor is not None:
        page = a.conversation(biggest.key, after=page.next_cursor, limit=3)
        assert page is not None
        forward += [m.key for m in page.messages]
    assert forward == seen
    middle = seen[len(seen) // 2]
    around = a.conversation(biggest.key, around=middle, limit=4)
    assert around is not None and middle in [m.key for m in around.messages]
    mail = a.conversation("messages/md/lease2%40example.com.json")
    assert mail is not None and [m.kind for m in mail.messages] == ["email", "email"] and mail.summary.title == "Lease renewal"
    assert a.conversation(123456789) is None


def test_a_timeline_of_days_across_sources(archive: Path) -> None:
    """timeline: the messages of a span of days, every source, in time order, both days included."""
    a = _open(archive)
    day = a.timeline(date(2025, 6, 1), date(2025, 6, 1))
    assert [m.key for m in day] == ["messages/md/lease2%40example.com.json"]
    spring = a.timeline(date(2025, 3, 10), date(2025, 6, 1))
    assert len(spring) == 3 and [m.sent for m in spring] == sorted(m.sent for m in spring if m.sent)


def test_people_and_a_person(archive: Path) -> None:
    """people: everyone seen in messages (after `memex people`), by name; person: one's handles, messages per
    source, and their conversations; a name naming nobody is None."""
    out = run_cli("people", config=archive)
    assert out.returncode == 0, out.stderr
    a = _open(archive)
    everyone = a.people(limit=500)
    assert everyone and any("anna@example.com" in p.handles for p in everyone)
    anna = a.person("anna@example.com")
    assert anna is not None and anna.sources.get("md", 0) >= 2 and anna.conversations
    assert a.person("nobody-at-all-xyz") is None


def test_sources_health(archive: Path) -> None:
    """sources: each configured source as `memex status` shows it."""
    rows = {s.name: s for s in _open(archive).sources()}
    assert set(rows) == {"md", "imessage"} and rows["md"].type == "maildir" and rows["md"].last_poll


def test_the_read_model_imports_nothing_that_writes(archive: Path) -> None:
    """Answering search, counts, a message, conversations, a timeline and people loads none of what polls, moves
    cursors or writes the index; its connection refuses writes."""
    code = ("import json, sys, datetime; from memex.config import load; from memex.read import open_archive; "
            "a = open_archive(load(sys.argv[1])); a.search('lease'); a.counts('*', 'month'); a.message('lunch@example.net'); "
            "a.conversations(); a.timeline(datetime.date(2025, 1, 1), datetime.date(2025, 12, 31)); a.people(); "
            "print(json.dumps(sorted(sys.modules)))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code, str(archive)], capture_output=True, text=True, cwd=ROOT, timeout=patience(60))
    assert out.returncode == 0, out.stderr
    forbidden = ("memex.runner", "memex.uploader", "memex.backfill", "memex.search.build", "memex.search.bulk",
                 "memex.search.index", "memex.state.cursors", "memex.verify", "memex.watch", "pollers", "click")  # fmt: skip
    assert [m for m in json.loads(out.stdout) if m.startswith(forbidden)] == []
    import sqlite3

    with _open(archive).reading() as db, pytest.raises(sqlite3.OperationalError):
        db.execute("DELETE FROM messages")
