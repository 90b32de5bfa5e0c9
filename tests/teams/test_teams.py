"""Teams through Microsoft Graph: sign-in, chat walks, revisions, faults, against a local HTTPS Graph and identity platform."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memex import config as config_mod
from memex.observe import health
from memex.observe.dashboard import render_text
from memex.observe.status import collect
from memex.records import decode_id
from memex.registry import make_poller
from memex.runner import poll
from memex.state.cursors import CursorStore
from tests.conftest import assert_valid, patience, read_log, wait_until
from tests.servers.graph import ME, TENANT, Fault, GraphServer

CHAT_A = "19:2da4c29f6d7041eca70b638b43d45437@thread.v2"
CHAT_B = "19:8ea0e38b-efb3-4757-924a-5f94061cf8c2_0a1b2c3d-4e5f-6789-abcd-ef0123456789@unq.gbl.spaces"
CHAT_C = "19:meeting_NzE2YjM4;messageid=1616964509832@thread.v2"
ADELE = ("u-2", "Adele Vance")


@pytest.fixture
def graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GraphServer]:
    """A running stand-in whose certificate the HTTP clients trust (REQUESTS_CA_BUNDLE, as a corporate CA would be set)."""
    with GraphServer(tmp_path) as server:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(server.cert))
        yield server


def write_config(tmp_path: Path, server: GraphServer, **extra: Any) -> Path:
    """A config with one teams source pointed at the stand-in, a file store and a private state folder."""
    keys = {
        "type": "teams",
        "client_id": server.client_id,
        "tenant": TENANT,
        "authority": server.base,
        "graph_url": server.graph,
        "timeout": 5,
    }
    keys.update(extra)
    lines = [f'state_dir = "{tmp_path / "state"}"', "[store]", f'url = "{(tmp_path / "store").as_uri()}"', "[sources.teams]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def sign_in(cfg: config_mod.Config) -> list[str]:
    """Run the device-code flow in-process, as `memex auth teams` does; return what it said."""
    said: list[str] = []
    poller = make_poller(cfg.source("teams"))
    try:
        poller.authenticate(said.append)  # type: ignore[attr-defined]
    finally:
        poller.close()
    return said


def stored(tmp_path: Path, prefix: str = "messages/teams/") -> dict[str, dict[str, Any]]:
    """Every stored record under ``prefix`` by key."""
    root = tmp_path / "store"
    out = {}
    for p in sorted((root / prefix).rglob("*.json")) if (root / prefix).exists() else []:
        out[p.relative_to(root).as_posix()] = json.loads(p.read_text())
    return out


def logs_text(state_dir: Path) -> str:
    """Everything the source's logs hold (there must be some: an empty read would make a canary check vacuous)."""
    text = "".join(p.read_text() for p in sorted((state_dir / "logs").iterdir()) if p.is_file())
    assert '"event":"poll"' in text.replace(" ", "") or '"event": "poll"' in text
    return text


def cursor(cfg: config_mod.Config) -> Any:
    """The teams source's stored cursor."""
    return CursorStore(cfg.state_dir).cursor("teams")


@pytest.fixture
def setup(tmp_path: Path, graph: GraphServer) -> tuple[config_mod.Config, GraphServer]:
    """A signed-in teams source over three chats with a few messages each."""
    graph.add_chat(CHAT_A, topic="Project Falcon", members=[(ME, "Megan Bowen"), ADELE])
    graph.add_chat(CHAT_B, chat_type="oneOnOne", members=[(ME, "Megan Bowen"), ADELE])
    graph.add_chat(CHAT_C, topic="Weekly sync", chat_type="meeting", members=[(ME, "Megan Bowen")])
    cfg = config_mod.load(write_config(tmp_path, graph, page_size=5))
    sign_in(cfg)
    return cfg, graph


def test_first_sync_walks_every_chat_through_its_pages(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """A first sync stores every message of every chat once, following @odata.nextLink, newest first, without $filter."""
    cfg, graph = setup
    ids = {CHAT_A: [graph.post(CHAT_A, f"falcon {i}", user=ADELE if i % 2 else (ME, "Megan Bowen")) for i in range(12)],
           CHAT_B: [graph.post(CHAT_B, f"<p>hi <b>{i}</b></p>", html=True) for i in range(3)], CHAT_C: []}  # fmt: skip
    result = poll(cfg, "teams")
    assert (result.status, result.new, result.dup, result.exit_code) == ("ok", 15, 0, 0), result.error
    records = stored(tmp_path)
    got = {r["native_id"] for r in records.values()}
    assert got == {f"{c}/{m}" for c, ms in ids.items() for m in ms}
    walks = graph.requests(f"/v1.0/me/chats/{CHAT_A}/messages")
    assert len(walks) == 3  # 12 messages, pages of 5
    assert walks[0]["query"]["$orderby"] == "lastModifiedDateTime desc" and "$filter" not in walks[0]["query"]
    assert all("$skiptoken" in w["query"] for w in walks[1:])
    mine = next(r for r in records.values() if r["text"] == "falcon 0")
    assert mine["sender"] == {"id": ME, "name": "Megan Bowen", "is_me": True}
    assert mine["conversation"]["name"] == "Project Falcon" and "adele@contoso.com" in mine["conversation"]["participants"]
    html = next(r for r in records.values() if r["text"] == "hi 1")
    assert html["extra"]["html"] == "<p>hi <b>1</b></p>" and html["conversation"]["name"] == "Adele Vance"
    assert cursor(cfg)["chats"].keys() == {CHAT_A, CHAT_B, CHAT_C}  # an empty chat is remembered as walked


def test_keys_cope_with_colon_at_and_semicolon_in_chat_ids(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """Chat IDs with ':', '@' and ';' make safe keys that decode back to chat ID + message ID."""
    cfg, graph = setup
    mid = graph.post(CHAT_C, "meeting note")
    assert poll(cfg, "teams").new == 1
    (key,) = stored(tmp_path)
    encoded = key.removeprefix("messages/teams/").removesuffix(".json")
    assert ":" not in encoded and "@" not in encoded and ";" not in encoded and "/" not in encoded
    assert decode_id(encoded) == f"{CHAT_C}/{mid}"


def test_incremental_poll_stores_new_messages_and_changes_as_revisions(
    tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]
) -> None:
    """Edits, deletions and reactions become revisions of the stored message; originals stay; nothing is read twice."""
    cfg, graph = setup
    first = [graph.post(CHAT_A, f"m{i}", step=30) for i in range(4)]
    assert poll(cfg, "teams").new == 4
    originals = stored(tmp_path)
    graph.tick(120)
    graph.edit(CHAT_A, first[0], "m0 (edited)")
    graph.delete(CHAT_A, first[1])
    graph.react(CHAT_A, first[2], "like")
    new = graph.post(CHAT_A, "m4")
    result = poll(cfg, "teams")
    assert (result.new, result.dup, result.exit_code) == (4, 0, 0), result.error
    assert {k: v for k, v in stored(tmp_path).items() if k in originals} == originals  # never rewritten
    assert f"{CHAT_A}/{new}" in {r["native_id"] for r in stored(tmp_path).values()}
    revisions = stored(tmp_path, "revisions/teams/")
    kinds = {(r["native_id"].rpartition("/")[2], r["revision"]["kind"]) for r in revisions.values()}
    assert kinds == {(first[0], "edit"), (first[1], "delete"), (first[2], "reactions")}
    edit = next(r for r in revisions.values() if r["revision"]["kind"] == "edit")
    assert edit["text"] == "m0 (edited)" and edit["edited_at"]
    every = assert_valid({**stored(tmp_path), **revisions})  # originals and revisions: memex.message/1
    assert {r["type"] for r in every} == {"message"}  # never an invented "teams"
    assert next(r for r in revisions.values() if r["revision"]["kind"] == "delete")["deleted"] is True
    walk = graph.requests(f"/v1.0/me/chats/{CHAT_A}/messages")[-1]
    assert walk["query"]["$filter"].startswith("lastModifiedDateTime gt ")
    # A third poll finds nothing: the overlap's re-reads are recognised, not counted as duplicates.
    again = poll(cfg, "teams")
    assert (again.status, again.new, again.dup) == ("idle", 0, 0)
    # The same reactions again (added and removed) is no new revision; a changed set is.
    graph.react(CHAT_A, first[2], "heart")
    graph.react(CHAT_A, first[2], "heart", remove=True)
    assert (poll(cfg, "teams").new, len(stored(tmp_path, "revisions/teams/"))) == (0, 3)
    graph.react(CHAT_A, first[2], "laugh", user=(ME, "Megan Bowen"))
    assert (poll(cfg, "teams").new, len(stored(tmp_path, "revisions/teams/"))) == (1, 4)


def test_chat_created_between_polls_is_walked_from_its_start(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """A chat that appears after the first sync is read whole (no $filter), even its messages older than other chats' cursors."""
    cfg, graph = setup
    graph.post(CHAT_A, "a")
    assert poll(cfg, "teams").new == 1
    late = "19:late0000000000000000000000000000@thread.v2"
    graph.add_chat(late, topic="Later")
    graph.chats[late].messages["1"] = {**graph.chats[CHAT_A].messages[next(iter(graph.chats[CHAT_A].messages))], "id": "1", "chatId": late}
    graph.post(late, "welcome")
    assert poll(cfg, "teams").new == 2
    assert "$filter" not in graph.requests(f"/v1.0/me/chats/{late}/messages")[0]["query"]


def test_system_messages_images_and_files(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """System events are kept and marked; inline images are stored content-addressed; file links stay metadata."""
    cfg, graph = setup
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(64)
    graph.system(CHAT_A, "Falcon 2")
    img = graph.post(CHAT_A, "<p>look</p>", images={"aWQ9eF8wLXd1cy1kOS1l": png})
    graph.post(CHAT_B, "same picture", images={"aWQ9eF8xLXd1cy1": png})
    graph.post(CHAT_A, "the spec", files=[{"id": "5ec6a5ba-1c0a-4a5d-9e40-6a1c2f0e6a57", "contentType": "reference",
               "contentUrl": "https://contoso.sharepoint.com/sites/falcon/Shared%20Documents/spec.docx", "name": "spec.docx"}])  # fmt: skip
    assert poll(cfg, "teams").new == 4
    records = list(stored(tmp_path).values())
    system = next(r for r in records if r["extra"].get("system"))
    assert system["text"] is None and system["extra"]["event_detail"]["chatDisplayName"] == "Falcon 2"
    assert_valid(records)
    assert system["type"] == "event" and {r["type"] for r in records if r is not system} == {"message"}
    assert system["sender"]["id"] is None
    pic = next(r for r in records if r["native_id"].endswith(img))
    (att,) = pic["attachments"]
    assert att["size"] == len(png) and (tmp_path / "store" / "attachments" / att["sha256"]).read_bytes() == png
    assert pic["text"] == "look\n[image]" or pic["text"].startswith("look")
    assert len(list((tmp_path / "store" / "attachments").iterdir())) == 1  # the same bytes once
    spec = next(r for r in records if r["text"] == "the spec")
    assert spec["attachments"] == [{"id": "5ec6a5ba-1c0a-4a5d-9e40-6a1c2f0e6a57", "filename": "spec.docx", "mime_type": None, "size": None}]
    assert spec["extra"]["attachments"][0]["contentUrl"].startswith("https://contoso.sharepoint.com/")
    assert all(r["headers"].get("Prefer") == "include-unknown-enum-members" for r in graph.requests("/v1.0/me/chats/"))


def test_throttling_is_waited_out_within_the_deadline(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """429 and 503 with Retry-After, and a plain 500, mid-walk are retried (after the wait asked); the walk completes, nothing lost."""
    cfg, graph = setup
    for i in range(12):
        graph.post(CHAT_A, f"t{i}")
    throttled = graph.fault(f"/me/chats/{CHAT_A}/messages", 429, headers={"Retry-After": "2"}, after=1)
    unavailable = graph.fault(f"/me/chats/{CHAT_A}/messages", 503, headers={"Retry-After": "0"}, after=1)  # counts from the 429's end
    broken = graph.fault(f"/me/chats/{CHAT_B}/messages", 500)
    result = poll(cfg, "teams")
    assert (result.new, result.exit_code) == (12, 0), result.error
    assert (throttled.hits, unavailable.hits, broken.hits) == (2, 2, 1)  # each fault was met (page 2: 429, page 3: 503)
    assert len(stored(tmp_path)) == 12
    asked = [r["at"] for r in graph.requests(f"/me/chats/{CHAT_A}/messages")]
    assert len(asked) == 3 + 2  # 3 pages, 2 of them asked twice
    assert asked[2] - asked[1] >= 2.0  # the 429's Retry-After was honoured, as the server saw it (a lower bound, not a speed)


def test_retry_after_is_read_in_seconds_and_as_an_http_date() -> None:
    """Both forms of RFC 9110's Retry-After: seconds, and an HTTP-date counted from the answer's Date (this machine's clock
    without one); a date already past is 0 (retry now), anything larger is capped, anything unreadable is None."""
    from pollers.teams.graph import MAX_RETRY_AFTER, _retry_after

    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert _retry_after(" 120 ") == 120.0 and _retry_after("0") == 0.0 and _retry_after("86400") == MAX_RETRY_AFTER
    assert _retry_after("Wed, 21 Oct 2015 07:28:30 GMT", date) == 30.0
    assert _retry_after("Wed, 21 Oct 2015 09:28:00 +0200", date) == 0.0  # the same instant in another zone
    assert _retry_after("Wed, 21 Oct 2015 07:27:00 GMT", date) == 0.0  # already past: now
    assert _retry_after("Wed, 21 Oct 2015 07:28:30 GMT", None) == 0.0  # past by this machine's clock
    assert _retry_after("Fri, 32 Foo 2015 99:00:00 GMT", date) is None
    assert _retry_after("Tue, 01 Jan 2999 00:00:00 GMT", None) == MAX_RETRY_AFTER
    for bad in (None, "", "soon", "-5", "nan"):
        assert _retry_after(bad, date) is None, bad


def test_throttling_with_an_http_date_is_waited_out_or_fails_the_chat_in_time(
    tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]
) -> None:
    """A 429 whose Retry-After is an HTTP-date: one the poll's deadline cannot reach fails that chat at once (its cursor kept,
    exit 1); one a few seconds past the stand-in's Date is waited out (at least that long) and the walk completes."""
    from datetime import timedelta
    from email.utils import format_datetime

    cfg, graph = setup
    for i in range(7):
        graph.post(CHAT_A, f"d{i}")
    late = format_datetime(graph.now + timedelta(hours=1), usegmt=True)
    graph.fault(f"/me/chats/{CHAT_A}/messages", 429, headers={"Retry-After": late}, after=1)
    result = poll(cfg, "teams", max_seconds=60)
    assert result.exit_code == 1 and "no time left in this poll to retry" in (result.error or ""), result.error
    assert CHAT_A not in cursor(cfg)["chats"] or "below" in cursor(cfg)["chats"][CHAT_A]
    graph.faults.clear()
    soon = format_datetime(graph.now + timedelta(seconds=3), usegmt=True)
    throttled = graph.fault(f"/me/chats/{CHAT_A}/messages", 429, headers={"Retry-After": soon})
    started = time.monotonic()
    again = poll(cfg, "teams", max_seconds=60)
    assert (again.exit_code, len(stored(tmp_path))) == (0, 7), again.error
    assert time.monotonic() - started >= 3.0 and throttled.hits == 1  # the date was honoured (a lower bound, not a speed)


def test_a_failing_chat_keeps_its_cursor_while_others_go_on(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """A chat that keeps failing past the deadline is named in one error line (exit 1); other chats are stored and advance."""
    cfg, graph = setup
    graph.post(CHAT_A, "stuck")
    graph.post(CHAT_B, "fine")
    graph.fault(f"/me/chats/{CHAT_A}/messages", 500, times=1000)
    result = poll(cfg, "teams", max_seconds=3)
    assert result.exit_code == 1 and CHAT_A in (result.error or "") and "kept" in (result.error or "")
    assert {r["text"] for r in stored(tmp_path).values()} == {"fine"}
    assert set(cursor(cfg)["chats"]) == {CHAT_B, CHAT_C}
    graph.faults.clear()
    assert poll(cfg, "teams").new == 1


def test_expired_access_token_is_refreshed_silently(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """A 401 on an expired access token triggers one silent refresh (refresh_token grant) and the poll succeeds."""
    cfg, graph = setup
    graph.post(CHAT_A, "x")
    graph.expire_access()
    result = poll(cfg, "teams")
    assert (result.new, result.exit_code) == (1, 0), result.error
    grants = [r["form"]["grant_type"] for r in graph.requests("/oauth2/v2.0/token")]
    assert grants[-1] == "refresh_token"


def test_revoked_login_says_run_memex_auth(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """A revoked login fails the poll with one line telling the user to run `memex auth teams`, status shows AUTH at once, no token appears."""
    cfg, graph = setup
    graph.post(CHAT_A, "x")
    graph.revoke()
    result = poll(cfg, "teams")
    assert result.exit_code == 1 and "run `memex auth teams`" in (result.error or "")
    assert cursor(cfg) is None and stored(tmp_path) == {}
    log = logs_text(cfg.state_dir)
    for token in graph.issued:
        assert token not in (result.error or "") and token not in log
    (row,) = collect(cfg)
    assert row["state"] == "AUTH" and "memex auth teams" in row["state_reason"]  # from the first failure, not the third
    assert "AUTH" in render_text(cfg, width=120)
    graph.refresh.add("unused")  # signing in again clears it
    sign_in(cfg)
    assert poll(cfg, "teams").new == 1
    assert collect(cfg)[0]["state"] == "OK"


def test_memex_auth_cli_device_flow_and_private_cache(tmp_path: Path, graph: GraphServer) -> None:
    """`memex auth` prints the URL and code, keeps the cache 0600 in a 0700 folder, and prints no token; polls then run silently."""
    graph.add_chat(CHAT_A)
    graph.post(CHAT_A, "hello")
    path = write_config(tmp_path, graph)
    env = {**os.environ, "MEMEX_CONFIG": str(path), "REQUESTS_CA_BUNDLE": str(graph.cert)}
    proc = subprocess.run([sys.executable, "-m", "memex", "auth", "teams"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "https://microsoft.com/devicelogin" in proc.stderr and "GXQ4B7ZPM" in proc.stderr
    assert "signed in as megan@contoso.com" in proc.stdout
    cache = tmp_path / "state" / "auth" / "teams.msal.json"
    assert cache.stat().st_mode & 0o777 == 0o600 and cache.parent.stat().st_mode & 0o777 == 0o700
    polled = subprocess.run([sys.executable, "-m", "memex", "poll", "teams"], env=env, capture_output=True, text=True, timeout=60)
    assert polled.returncode == 0, polled.stderr
    graph.revoke()
    graph.expire_access()
    failed = subprocess.run([sys.executable, "-m", "memex", "poll", "teams"], env=env, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and "memex auth teams" in failed.stderr and "Traceback" not in failed.stderr
    logs = logs_text(tmp_path / "state")
    outputs = proc.stdout + proc.stderr + polled.stdout + polled.stderr + failed.stdout + failed.stderr + logs
    assert graph.issued and not [t for t in graph.issued if t in outputs]


def test_auth_refused_for_a_source_without_sign_in(tmp_path: Path) -> None:
    """`memex auth` on a source type that needs no sign-in is a usage error (exit 2), one line."""
    maildir = tmp_path / "mail"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    path = tmp_path / "config.toml"
    path.write_text(f'state_dir = "{tmp_path / "state"}"\n[sources.mail]\ntype = "maildir"\npath = "{maildir}"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "memex", "--config", str(path), "auth", "mail"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "need no sign-in" in proc.stderr and proc.stderr.count("\n") == 1


def test_config_rejects_bad_teams_keys(tmp_path: Path, graph: GraphServer) -> None:
    """Wrong types, http URLs and unknown keys are config errors naming the key."""
    for extra, key in (
        ({"page_size": 51}, "page_size"),
        ({"graph_url": "http://graph.example"}, "graph_url"),
        ({"chanels": True}, "chanels"),
        ({"watch_interval": 0}, "watch_interval"),
    ):
        cfg = config_mod.load(write_config(tmp_path, graph, **extra))
        with pytest.raises(config_mod.ConfigError, match=key):
            make_poller(cfg.source("teams"))


def test_kill_9_mid_walk_then_rerun_stores_every_message_once(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """A poll killed while a chat's walk is between pages saved only where to resume; the rerun stores the rest, each once."""
    cfg, graph = setup
    ids = [graph.post(CHAT_A, f"k{i}") for i in range(14)]
    hang = threading.Event()
    fault = graph.fault(f"/me/chats/{CHAT_A}/messages", hang=hang, after=1)  # the second page hangs
    env = {**os.environ, "MEMEX_CONFIG": str(cfg.path), "REQUESTS_CA_BUNDLE": str(graph.cert)}
    proc = subprocess.Popen([sys.executable, "-m", "memex", "poll", "teams"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while fault.hits < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert fault.hits == 2, "the walk never reached its second page"
        assert len(stored(tmp_path)) == 5  # the first page is stored
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        hang.set()
    entry = cursor(cfg)["chats"][CHAT_A]  # no cursor past an unwalked page: only where to resume
    assert entry["t"] == 0 and entry["below"][0] > 0
    graph.faults.clear()
    result = poll(cfg, "teams")
    assert (result.new, result.dup, result.exit_code) == (9, 0, 0), result.error
    assert sorted(r["native_id"] for r in stored(tmp_path).values()) == sorted(f"{CHAT_A}/{m}" for m in ids)


def test_backfill_walks_whole_histories_within_since_until(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """`memex backfill` stores exactly the messages created in [since, until) of every chat; a live poll then only meets duplicates."""
    from datetime import UTC, datetime

    from memex.backfill import backfill
    from pollers.teams.render import parse_ts

    cfg, graph = setup
    posted = [(c, graph.post(c, f"h{i}", step=3600)) for i in range(6) for c in (CHAT_A, CHAT_B, CHAT_C)]
    created = {f"{c}/{m}": parse_ts(graph.chats[c].messages[m]["createdDateTime"]) for c, m in posted}
    graph.edit(CHAT_A, posted[0][1], "h0 edited")
    since, until = sorted(created.values())[3], sorted(created.values())[12]
    window = {k for k, t in created.items() if since <= (t or 0) < until}
    result = backfill(cfg, "teams", since=datetime.fromtimestamp(since / 1e6, UTC), until=datetime.fromtimestamp(until / 1e6, UTC))
    assert (result.exit_code, result.new) == (0, 9), result.error
    assert {r["native_id"] for r in stored(tmp_path).values()} == window
    whole = backfill(cfg, "teams", restart=True)
    assert (whole.exit_code, whole.new, whole.dup) == (0, 9, 9)
    live = poll(cfg, "teams")
    assert (live.new, live.dup, live.exit_code) == (0, 18, 0)


def test_history_resumes_right_after_its_checkpoint(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """History resumed from any yielded item's cursor yields exactly the items after it, across pages and chats."""
    cfg, graph = setup
    for i in range(7):
        graph.post(CHAT_A, f"a{i}")
        graph.post(CHAT_B, f"b{i}")
    poller = make_poller(cfg.source("teams"))
    try:
        full = list(poller.history(None, None, None))  # type: ignore[attr-defined]
        ids = [i.message.native_id for i in full]
        assert len(ids) == len(set(ids)) == 14
        for cut in (0, 4, 6, 7, 12):
            rest = [i.message.native_id for i in poller.history(None, None, full[cut].cursor)]  # type: ignore[attr-defined]
            assert rest == ids[cut + 1 :]
    finally:
        poller.close()


def test_a_message_without_id_or_created_time_is_quarantined_and_the_walk_goes_on(
    tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]
) -> None:
    """Backfill: a chatMessage without ``id`` and one without ``createdDateTime``, amid good ones over several pages, are one
    quarantine entry each (their JSON as raw bytes, the reason naming the missing field, never the text); every good one is
    stored and the exit code is 0, as for any quarantine. The live poll quarantines the one without ``id`` the same way."""
    from memex.backfill import backfill

    cfg, graph = setup
    ids = [graph.post(CHAT_A, f"canary-body-{i}") for i in range(12)]
    messages = graph.chats[CHAT_A].messages
    no_id = messages.pop(ids[3])
    del no_id["id"]
    messages["no-id"] = no_id  # the stand-in's key only: Graph's page carries the message without an id
    no_created = messages[ids[8]]
    del no_created["createdDateTime"]
    result = backfill(cfg, "teams")
    assert (result.exit_code, result.new, result.quarantined) == (0, 10, 2), result.error
    assert {r["native_id"] for r in stored(tmp_path).values()} == {f"{CHAT_A}/{m}" for m in ids if m not in (ids[3], ids[8])}
    folder = tmp_path / "store" / "quarantine" / "teams"
    metas = [json.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))]
    reasons = {m["native_id"].startswith(f"{CHAT_A}/no-id-"): m["reason"] for m in metas}
    assert reasons[True].startswith("chatMessage has no id;") and reasons[False].startswith("chatMessage has no createdDateTime;")
    assert sorted(json.loads(p.read_bytes())["body"]["content"] for p in folder.glob("*.raw")) == ["canary-body-3", "canary-body-8"]
    live = poll(cfg, "teams")  # the one without id is the same entry again; the one without createdDateTime has what a poll needs
    assert (live.exit_code, live.quarantined, live.new, live.dup) == (0, 1, 1, 10), live.error
    assert len(list(folder.glob("*.raw"))) == 2
    assert "canary-body" not in json.dumps(metas) + logs_text(cfg.state_dir)


def test_start_now_stores_only_what_comes_later(tmp_path: Path, graph: GraphServer) -> None:
    """With start = "now" the first poll only positions each chat at its head; the next poll stores only later messages."""
    graph.add_chat(CHAT_A)
    graph.post(CHAT_A, "old")
    cfg = config_mod.load(write_config(tmp_path, graph, start="now"))
    sign_in(cfg)
    first = poll(cfg, "teams")
    assert (first.new, first.exit_code) == (0, 0) and stored(tmp_path) == {}
    graph.post(CHAT_A, "new")
    assert poll(cfg, "teams").new == 1
    assert [r["text"] for r in stored(tmp_path).values()] == ["new"]


def test_a_hung_response_times_out_and_is_retried(tmp_path: Path, graph: GraphServer) -> None:
    """A page that never answers is abandoned after `timeout` and asked again; the walk completes."""
    graph.add_chat(CHAT_A)
    for i in range(7):
        graph.post(CHAT_A, f"h{i}")
    cfg = config_mod.load(write_config(tmp_path, graph, page_size=5, timeout=1))
    sign_in(cfg)
    hang = threading.Event()
    fault = graph.fault(f"/me/chats/{CHAT_A}/messages", hang=hang, after=1)
    try:
        result = poll(cfg, "teams", max_seconds=30)
    finally:
        hang.set()
    assert (result.new, result.exit_code) == (7, 0), result.error
    assert fault.hits == 2 and len(graph.requests(f"/me/chats/{CHAT_A}/messages")) == 3


def test_the_token_never_leaves_the_graph_url(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """An @odata.nextLink pointing anywhere but graph_url is not followed (no connection, no token); that chat keeps its cursor."""
    import socket

    cfg, graph = setup
    for i in range(7):
        graph.post(CHAT_A, f"n{i}")
    graph.post(CHAT_B, "other chat")
    elsewhere = socket.create_server(("127.0.0.1", 0))
    elsewhere.settimeout(0.2)
    try:
        graph.next_link_base = f"https://127.0.0.1:{elsewhere.getsockname()[1]}/v1.0"
        result = poll(cfg, "teams", max_seconds=8)
        with pytest.raises(TimeoutError):
            elsewhere.accept()  # nobody connected
    finally:
        elsewhere.close()
    assert result.exit_code == 1 and "not following" in (result.error or "") and CHAT_A in (result.error or "")
    assert cursor(cfg)["chats"][CHAT_A]["t"] == 0 and cursor(cfg)["chats"][CHAT_B]["t"] > 0  # only where to resume
    assert "other chat" in {r["text"] for r in stored(tmp_path).values()}


CHANNEL = "19:4a95f7d8db4c4e7fae857bcebe0623e6@thread.tacv2"
TEAM = "fbe2bf47-16c8-47cf-b4a5-4b9b187c508b"


def test_channels_through_the_delta_query(tmp_path: Path, graph: GraphServer) -> None:
    """channels = true: posts and replies via delta (pages, then the deltaLink as cursor); later replies and edits only; 410 resyncs."""
    graph.add_channel(TEAM, CHANNEL, team_name="Contoso", name="General")
    graph.add_channel(TEAM, "19:second00000000000000000000000000@thread.tacv2", name="Random")
    roots = [graph.post(CHANNEL, f"post {i}", step=30) for i in range(4)]
    replies = [graph.post(CHANNEL, f"reply {i}", reply_root=roots[0], step=30) for i in range(3)]
    cfg = config_mod.load(write_config(tmp_path, graph, channels=True, page_size=3))
    sign_in(cfg)
    first = poll(cfg, "teams")
    assert (first.new, first.exit_code) == (7, 0), first.error
    records = {r["native_id"]: r for r in stored(tmp_path).values()}
    assert set(records) == {f"{CHANNEL}/{m}" for m in roots + replies}
    assert records[f"{CHANNEL}/{replies[0]}"]["reply_to"] == f"{CHANNEL}/{roots[0]}"
    assert records[f"{CHANNEL}/{roots[1]}"]["conversation"]["name"] == "Contoso / General"
    delta = cursor(cfg)["channels"][CHANNEL]["delta"]
    assert "$deltatoken" in delta or "%24deltatoken" in delta
    graph.tick(300)
    late = graph.post(CHANNEL, "late reply", reply_root=roots[0])
    graph.edit(CHANNEL, roots[2], "post 2 (edited)")
    second = poll(cfg, "teams")
    assert (second.new, second.dup, second.exit_code) == (2, 0, 0), second.error
    assert f"{CHANNEL}/{late}" in {r["native_id"] for r in stored(tmp_path).values()}
    (rev,) = stored(tmp_path, "revisions/teams/").values()
    assert rev["revision"]["kind"] == "edit" and rev["text"] == "post 2 (edited)"
    assert "deltatoken" in graph.requests(f"/channels/{CHANNEL}/messages/delta")[-1]["query"].__repr__()
    assert poll(cfg, "teams").new == 0
    graph.fault(f"/channels/{CHANNEL}/messages/delta", 410)
    resync = poll(cfg, "teams")
    assert (resync.new, resync.dup, resync.exit_code) == (0, 0, 0), resync.error
    assert "$deltatoken" not in graph.requests(f"/channels/{CHANNEL}/messages/delta")[-2]["query"]


def test_a_poll_out_of_time_stops_its_walk_cleanly(tmp_path: Path, graph: GraphServer) -> None:
    """At the deadline the walk stops between requests (stopped=deadline, exit 0, progress saved); chats not reached keep their cursors."""
    chats = [f"19:{i:032x}@thread.v2" for i in range(30)]
    for cid in chats:
        graph.add_chat(cid)
        graph.post(cid, f"in {cid[3:8]}")
    cfg = config_mod.load(write_config(tmp_path, graph, timeout=120))  # only the deadline can end the hung request
    sign_in(cfg)
    assert poll(cfg, "teams", max_seconds=60).new == 30
    before = cursor(cfg)
    graph.post(chats[0], "early")
    graph.post(chats[-1], "late")
    asked = len(graph.requests(f"/me/chats/{chats[-1]}/messages"))
    hang = threading.Event()  # the second chat's page hangs until the deadline: the poll is cut there, whatever the machine's speed
    graph.faults.append(Fault(f"/me/chats/{chats[1]}/messages", hang=hang))
    result: list[Any] = []
    walk = threading.Thread(target=lambda: result.append(poll(cfg, "teams", max_seconds=5)), daemon=True)
    walk.start()
    try:
        walk.join(patience(60))  # a request deaf to the deadline would hold the poll for the 120 s request timeout
        assert not walk.is_alive(), "the poll outlived its 5 s limit by a minute: a request deaf to the deadline"
    finally:
        hang.set()
        walk.join(130)
    short = result[0]
    assert (short.exit_code, short.stopped, short.new) == (0, "deadline", 1), short.error
    assert len(graph.requests(f"/me/chats/{chats[-1]}/messages")) == asked  # no request after the deadline
    assert cursor(cfg)["chats"][chats[-1]] == before["chats"][chats[-1]] != cursor(cfg)["chats"][chats[0]]
    again = poll(cfg, "teams", max_seconds=60)
    assert (again.exit_code, again.new, again.dup) == (0, 1, 0), again.error


def test_sigterm_mid_walk_ends_the_poll_within_seconds_with_progress_saved(
    tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]
) -> None:
    """SIGTERM while Graph hangs on a page ends the poll within the grace; the stored page counts, the chat's cursor stays."""
    _, graph = setup
    cfg = config_mod.load(write_config(tmp_path, graph, page_size=5, timeout=120))  # only the deadline can end the hung request
    for i in range(7):
        graph.post(CHAT_A, f"s{i}")
    hang = threading.Event()
    fault = graph.fault(f"/me/chats/{CHAT_A}/messages", hang=hang, after=1)
    env = {**os.environ, "MEMEX_CONFIG": str(cfg.path), "REQUESTS_CA_BUNDLE": str(graph.cert)}
    proc = subprocess.Popen([sys.executable, "-m", "memex", "poll", "teams", "--max-seconds", "120"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while fault.hits < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert fault.hits == 2, "the walk never reached its second page"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)  # GRACE is 2 s; the hung request would otherwise hold it 120 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        hang.set()
    assert proc.returncode == 0 and "Traceback" not in err
    assert len(stored(tmp_path)) == 5 and cursor(cfg)["chats"][CHAT_A]["t"] == 0  # only where to resume


def test_a_poll_never_overwrites_a_newer_sign_in(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """A poll holding a stale login that refreshes after `memex auth` replaced the cache leaves the new login in place."""
    cfg, graph = setup
    graph.post(CHAT_A, "x")
    stale = make_poller(cfg.source("teams"))
    try:
        stale.login.account()  # type: ignore[attr-defined]  # the poll has read the cache
        sign_in(cfg)  # the user signs in again meanwhile
        fresh = (cfg.state_dir / "auth" / "teams.msal.json").read_text()
        graph.expire_access()
        stale.login.token(force_refresh=True)  # type: ignore[attr-defined]  # the stale poll refreshes (MSAL changes its cache)
    finally:
        stale.close()
    assert (cfg.state_dir / "auth" / "teams.msal.json").read_text() == fresh


DOCS = Path(__file__).parent / "data" / "graph_docs"  # response examples from Microsoft's Graph reference (microsoft-graph-docs-contrib)


def test_microsoft_documented_responses_are_stored_or_quarantined(tmp_path: Path, graph: GraphServer) -> None:
    """The chatMessage examples of Microsoft's docs, served as is: each is stored or quarantined with its raw bytes, none lost.

    The chat example's system message carries the documented malformed timestamp "2021-03-1706:47:05.123Z": it is
    quarantined, not allowed to stop the chat. Fields are checked against the JSON read independently.
    """
    chat_doc = json.loads((DOCS / "chat-list-messages.json").read_text())
    delta_doc = json.loads((DOCS / "chatmessage-delta.json").read_text())
    graph.add_chat(CHAT_A, topic="Graph Members")
    graph.chats[CHAT_A].messages = {m["id"]: m for m in chat_doc["value"]}
    graph.add_channel(TEAM, CHANNEL)
    for m in delta_doc["value"]:
        graph.channels[CHANNEL].messages[m["id"]] = m
        graph.changed[(CHANNEL, m["id"])] = 1
    cfg = config_mod.load(write_config(tmp_path, graph, channels=True))
    sign_in(cfg)
    result = poll(cfg, "teams")
    assert (result.new, result.quarantined, result.exit_code) == (4, 1, 0), result.error
    records = {r["native_id"]: r for r in stored(tmp_path).values()}
    for doc, conv in ((chat_doc, CHAT_A), (delta_doc, CHANNEL)):
        for m in doc["value"]:
            key = f"{conv}/{m['id']}"
            if m["createdDateTime"] == "2021-03-1706:47:05.123Z":
                quarantined = tmp_path / "store" / "quarantine" / "teams"
                raws = [json.loads(p.read_bytes()) for p in quarantined.glob("*.raw")]
                assert [r["id"] for r in raws] == [m["id"]]
                continue
            rec = records[key]
            assert rec["sender"]["id"] == m["from"]["user"]["id"] and rec["sender"]["name"] == m["from"]["user"]["displayName"]
            assert rec["sent_at"].replace(".", "").startswith(m["createdDateTime"][:19].replace(".", ""))
            if m["body"]["contentType"] == "text":
                assert rec["text"] == m["body"]["content"]
            else:
                assert rec["extra"]["html"] == m["body"]["content"].replace("https://graph.microsoft.com/v1.0", graph.graph)
    image = records[f"{CHAT_A}/1615971548136"]
    assert image["text"] == "[image]" and image["attachments"][0]["id"].startswith("hostedContents/aWQ9eF8wLXd1cy1k")
    assert image["attachments"][0]["missing"] is True  # the docs' image bytes are not on the stand-in: listed, not lost


def test_a_history_longer_than_one_poll_is_read_across_polls(tmp_path: Path, graph: GraphServer) -> None:
    """A first sync that cannot finish within --max-seconds resumes below its last stored page: every message once, no re-reads."""
    graph.add_chat(CHAT_A)
    ids = [graph.post(CHAT_A, f"long {i}") for i in range(60)]
    cfg = config_mod.load(write_config(tmp_path, graph, page_size=5))
    sign_in(cfg)
    hang = threading.Event()  # the first poll's second page hangs: its time limit provably ends it mid-walk
    graph.fault(f"/me/chats/{CHAT_A}/messages", hang=hang, after=1)
    try:
        results = [poll(cfg, "teams", max_seconds=0.25)]
    finally:
        hang.set()
        graph.faults.clear()
    give_up = time.monotonic() + 180  # short polls until every message is stored (on a loaded machine some store nothing)
    while len(stored(tmp_path)) < 60 and time.monotonic() < give_up:
        results.append(poll(cfg, "teams", max_seconds=0.25))
    assert len(results) > 1 and results[0].stopped == "deadline", [(r.new, r.stopped, r.error) for r in results]
    results.append(poll(cfg, "teams", max_seconds=60))  # the rest of the walk: nothing new, nothing read twice
    assert results[-1].stopped is None and results[-1].exit_code == 0, results[-1].error
    assert sum(r.new for r in results) == 60 and sum(r.dup for r in results) == 0
    assert all(r.positions_after != r.positions_before for r in results if r.new)  # progress shows: never "stuck"
    assert sorted(r["native_id"] for r in stored(tmp_path).values()) == sorted(f"{CHAT_A}/{m}" for m in ids)
    graph.post(CHAT_A, "after")
    assert poll(cfg, "teams").new == 1
    assert "below" not in cursor(cfg)["chats"][CHAT_A]


def test_401_after_a_silent_refresh_is_the_run_memex_auth_line(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """Graph refusing even the freshly refreshed token (a revoked consent) ends the poll with the sign-in line and state AUTH."""
    cfg, graph = setup
    graph.post(CHAT_A, "x")
    graph.fault("/v1.0/me/chats", 401, times=2)
    result = poll(cfg, "teams")
    assert result.exit_code == 1 and "refused the refreshed token" in (result.error or "") and "memex auth teams" in (result.error or "")
    assert [r["form"]["grant_type"] for r in graph.requests("/oauth2/v2.0/token")][-1] == "refresh_token"
    assert collect(cfg)[0]["state"] == "AUTH"
    log = logs_text(cfg.state_dir)
    assert graph.issued and not [t for t in graph.issued if t in (result.error or "") + log]  # canary: no token in the line or the log


def test_message_text_never_reaches_logs_or_errors(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """A canary in message bodies, file names and chat topics appears in stored records only: not in logs, errors or stderr."""
    cfg, graph = setup
    canary = "CANARY-7f3e9b"
    graph.chats[CHAT_A].doc["topic"] = f"topic {canary}"
    graph.post(CHAT_A, f"<p>secret {canary}</p>", html=True)
    graph.post(CHAT_B, f"plain {canary}", files=[{"id": "f1", "contentType": "reference", "name": f"{canary}.docx",
                                                 "contentUrl": f"https://contoso.sharepoint.com/{canary}.docx"}])  # fmt: skip
    graph.chats[CHAT_C].messages["bad"] = {
        "id": "bad",
        "lastModifiedDateTime": "not a time",
        "body": {"contentType": "text", "content": canary},
    }
    graph.fault(f"/me/chats/{CHAT_B}/messages", 400, times=1000)  # one chat fails at once (no retry): its error line is printed too
    env = {**os.environ, "MEMEX_CONFIG": str(cfg.path), "REQUESTS_CA_BUNDLE": str(graph.cert)}
    proc = subprocess.run(
        [sys.executable, "-m", "memex", "poll", "teams", "--max-seconds", "60"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1 and CHAT_B in proc.stderr
    assert any(canary in json.dumps(r) for r in stored(tmp_path).values())  # it was stored
    logs = logs_text(tmp_path / "state")
    assert canary not in proc.stdout + proc.stderr + logs


def test_a_hand_edited_cursor_is_refused_with_what_to_do(tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]) -> None:
    """A cursor of the wrong shape (set by hand) stops the poll with one line naming `memex cursor reset`; it is not overwritten."""
    cfg, graph = setup
    graph.post(CHAT_A, "x")
    CursorStore(cfg.state_dir).set_cursor("teams", {"chats": {CHAT_A: "yesterday"}}, reason="set")
    result = poll(cfg, "teams")
    assert result.exit_code == 1 and "memex cursor reset teams" in (result.error or "") and "internal error" not in (result.error or "")
    assert cursor(cfg) == {"chats": {CHAT_A: "yesterday"}} and stored(tmp_path) == {}


SECOND = "19:second00000000000000000000000000@thread.tacv2"


def test_backfill_reads_channels_whole_within_since_until(tmp_path: Path, graph: GraphServer) -> None:
    """`memex backfill` with channels = true reads every channel's posts and replies (past the 1000 expanded inline) in [since, until)."""
    from datetime import UTC, datetime

    from memex.backfill import backfill
    from pollers.teams.render import parse_ts

    graph.add_chat(CHAT_A)
    graph.add_channel(TEAM, CHANNEL, name="General")
    graph.add_channel(TEAM, SECOND, name="Random")
    graph.max_replies = 2  # the rest of a chain comes from replies@odata.nextLink, as past 1000 on Graph
    posted = [(CHAT_A, graph.post(CHAT_A, "chat 0", step=3600))]
    roots = [graph.post(CHANNEL, f"post {i}", step=3600) for i in range(3)]
    posted += [(CHANNEL, r) for r in roots] + [(SECOND, graph.post(SECOND, "random post", step=3600))]
    posted += [(CHANNEL, graph.post(CHANNEL, f"reply {i}", reply_root=roots[0], step=3600)) for i in range(5)]
    convs = {**graph.chats, **graph.channels}
    created = {f"{c}/{m}": parse_ts(convs[c].messages[m]["createdDateTime"]) or 0 for c, m in posted}
    times = sorted(created.values())
    since, until = times[2], times[8]
    cfg = config_mod.load(write_config(tmp_path, graph, channels=True, page_size=2))
    sign_in(cfg)
    result = backfill(cfg, "teams", since=datetime.fromtimestamp(since / 1e6, UTC), until=datetime.fromtimestamp(until / 1e6, UTC))
    assert (result.exit_code, result.new) == (0, 6), result.error
    assert {r["native_id"] for r in stored(tmp_path).values()} == {k for k, t in created.items() if since <= t < until}
    assert graph.requests(f"/messages/{roots[0]}/replies")  # the chain's rest was read from its nextLink
    whole = backfill(cfg, "teams", restart=True)
    assert (whole.exit_code, whole.new, whole.dup) == (0, 4, 6), whole.error
    assert {r["native_id"] for r in stored(tmp_path).values()} == set(created)
    reply = next(r for r in stored(tmp_path).values() if r["text"] == "reply 4")
    assert reply["reply_to"] == f"{CHANNEL}/{roots[0]}" and reply["conversation"]["name"] == "Contoso / General"


def test_channel_history_resumes_at_its_channel(tmp_path: Path, graph: GraphServer) -> None:
    """A channel checkpoint skips every chat and the channels before it and reads its channel again whole: nothing skipped."""
    graph.add_chat(CHAT_A)
    graph.post(CHAT_A, "chat")
    graph.add_channel(TEAM, CHANNEL)
    graph.add_channel(TEAM, SECOND)
    root = graph.post(CHANNEL, "general post")
    graph.post(CHANNEL, "general reply", reply_root=root)
    graph.post(SECOND, "random post")
    cfg = config_mod.load(write_config(tmp_path, graph, channels=True))
    sign_in(cfg)
    poller = make_poller(cfg.source("teams"))
    try:
        full = [i for i in poller.history(None, None, None)]  # type: ignore[attr-defined]
        assert [i.message.text for i in full] == ["chat", "general post", "general reply", "random post"]
        second = max(CHANNEL, SECOND)
        rest = [i.message.conversation["id"] for i in poller.history(None, None, {"channel": second})]  # type: ignore[attr-defined]
        assert rest == [second] * (2 if second == CHANNEL else 1)
        again = [i.message.text for i in poller.history(None, None, full[1].cursor)]  # type: ignore[attr-defined]
        assert again == [i.message.text for i in full[1:]]  # the interrupted channel whole, then the rest
    finally:
        poller.close()


def test_start_now_with_channels_stores_only_what_comes_later(tmp_path: Path, graph: GraphServer) -> None:
    """start = "now" with channels: the first poll stores nothing and keeps each channel's deltaLink; later posts and replies are
    stored, an old post's edit is a revision (with the post as it is now as its original: never a revision without its original),
    and an old post that only comes back with its chain is not stored."""
    graph.add_channel(TEAM, CHANNEL)
    old = graph.post(CHANNEL, "old post", step=86400)  # long before the head
    recent = graph.post(CHANNEL, "recent post", step=5)  # inside the head round's window (Graph's clock, from its Date header)
    graph.post(CHANNEL, "recent reply", reply_root=recent, step=5)
    cfg = config_mod.load(write_config(tmp_path, graph, channels=True, start="now"))
    sign_in(cfg)
    first = poll(cfg, "teams")
    assert (first.new, first.exit_code) == (0, 0) and stored(tmp_path) == {}, first.error
    head = cursor(cfg)["channels"][CHANNEL]
    assert "$deltatoken" in head["delta"] or "%24deltatoken" in head["delta"]
    assert "$filter" in graph.requests(f"/channels/{CHANNEL}/messages/delta")[0]["query"]  # the head round asks only for recent chains
    graph.tick(120)
    new_reply = graph.post(CHANNEL, "reply to recent", reply_root=recent)
    old_reply = graph.post(CHANNEL, "reply to old", reply_root=old)
    new_post = graph.post(CHANNEL, "new post")
    graph.edit(CHANNEL, old, "old post (edited)")
    second = poll(cfg, "teams")
    assert (second.new, second.dup, second.exit_code) == (4, 0, 0), second.error
    originals = {r["native_id"]: r for r in stored(tmp_path).values()}
    assert originals.keys() == {f"{CHANNEL}/{m}" for m in (new_reply, old_reply, new_post, old)}
    assert originals[f"{CHANNEL}/{old}"]["text"] == "old post (edited)" and "revision" not in originals[f"{CHANNEL}/{old}"]
    (rev,) = stored(tmp_path, "revisions/teams/").values()
    assert rev["native_id"] == f"{CHANNEL}/{old}" and rev["revision"]["kind"] == "edit"
    assert poll(cfg, "teams").new == 0


def test_channel_inline_images_are_fetched_from_graph_url(tmp_path: Path, graph: GraphServer) -> None:
    """A channel post's and a reply's inline images, whose src names graph.microsoft.com, are fetched under graph_url and stored."""
    graph.add_channel(TEAM, CHANNEL)
    png, gif = b"\x89PNG\r\n\x1a\n" + os.urandom(32), b"GIF89a" + os.urandom(32)
    root = graph.post(CHANNEL, "<p>chart</p>", images={"aWQ9eF8wLXd1cy1kOS1l": png})
    graph.post(CHANNEL, "<p>zoomed</p>", images={"aWQ9eF8xLXd1cy1": gif}, reply_root=root)
    assert "https://graph.microsoft.com/v1.0/teams/" in graph.channels[CHANNEL].messages[root]["body"]["content"]
    cfg = config_mod.load(write_config(tmp_path, graph, channels=True))
    sign_in(cfg)
    result = poll(cfg, "teams")
    assert (result.new, result.exit_code) == (2, 0), result.error
    blobs = {p.read_bytes() for p in (tmp_path / "store" / "attachments").iterdir()}
    assert blobs == {png, gif}
    assert graph.requests(f"/messages/{root}/replies/")  # the reply's image from its own path
    assert all(not r.get("missing") for rec in stored(tmp_path).values() for r in rec["attachments"])


def test_the_watcher_polls_teams_at_its_watch_interval_and_waits_out_a_retry_after_the_poll_could_not(
    tmp_path: Path, setup: tuple[config_mod.Config, GraphServer]
) -> None:
    """Under ``memex watch`` (interval an hour) Teams is polled every ``watch_interval`` seconds (delta polling: no change
    notifications without a public HTTPS endpoint), so a new message is stored within seconds; a 429 whose Retry-After
    (3 s) outlasts the poll's time (--max-seconds-per-poll 2) is put in the poll line, and the next poll starts no
    sooner than that, though the watch interval is 1 s."""
    from tests.core.test_watch import STORED_WITHIN, stop, watching

    _, graph = setup
    cfg = config_mod.load(write_config(tmp_path, graph, page_size=5, interval=3600, watch_interval=1))
    env = {**{k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}, "REQUESTS_CA_BUNDLE": str(graph.cert)}
    state = tmp_path / "state"
    lines = lambda: [e for e in read_log(state, "teams") if e["event"] == "poll"]  # noqa: E731
    with watching(cfg.path, "teams", "--max-seconds-per-poll", "2", env=env) as proc:
        wait_until(lambda: lines(), STORED_WITHIN, "the first poll")
        graph.post(CHAT_A, "live")
        wait_until(lambda: any(r.get("text") == "live" for r in stored(tmp_path).values()), STORED_WITHIN, "the new message")
        graph.fault(f"/me/chats/{CHAT_A}/messages", 429, headers={"Retry-After": "3"})
        graph.post(CHAT_A, "after the pause")
        throttled = wait_until(lambda: next((e for e in lines() if e.get("retry_after_s")), None), STORED_WITHIN, "a throttled poll")
        wait_until(lambda: any(r.get("text") == "after the pause" for r in stored(tmp_path).values()), STORED_WITHIN, "the rest")
        stop(proc)
    start = next(e for e in read_log(state, "teams") if e["event"] == "watch.start")
    assert start["mode"] == "interval" and start["interval_s"] == 1.0
    after = [e for e in lines() if e["ts"] > throttled["ts"]]
    gap = health.parse_ts(after[0]["ts"]) - after[0]["duration_ms"] / 1000 - health.parse_ts(throttled["ts"])  # type: ignore[operator]
    assert throttled["retry_after_s"] == 3.0 and gap >= 2.9  # the Retry-After was honoured (a lower bound, not a speed)
