"""Heartbeat pings (healthchecks.io style) received by a real HTTP server on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from memex.state.locks import RunLock
from pollers.imessage import samples as imessage_samples
from tests.conftest import free_port, read_log, run_cli, wait_until, write_config


class Pings:
    """A loopback HTTP server recording every request's path, query and body."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, list[str]], bytes]] = []
        pings = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = urlsplit(self.path)
                pings.got.append((parts.path, parse_qs(parts.query), body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ping/3f2a"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def pings() -> Iterator[Pings]:
    """A running ping receiver."""
    p = Pings()
    yield p
    p.close()


def setup(tmp_path: Path, url: str, count: int = 20) -> tuple[Path, Path]:
    """A sample chat.db and a config whose source has ``heartbeat_url``."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, count, seed=5)
    return write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db), "heartbeat_url": url}}), db


def test_start_then_success_with_the_same_run_id(tmp_path: Path, pings: Pings) -> None:
    """A poll pings /start, then the base URL with the same rid; the body is the summary line, without message text."""
    cfg, _ = setup(tmp_path, pings.url)
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    wait_until(lambda: len(pings.got) >= 2, 10, "two pings")
    (p1, q1, _), (p2, q2, b2) = pings.got
    assert (p1, p2) == ("/ping/3f2a/start", "/ping/3f2a")
    assert q1["rid"] == q2["rid"]
    assert b2.decode() == "imessage: poll ok: 20 new (cursor - -> 20)"


def test_failure_pings_fail(tmp_path: Path, pings: Pings) -> None:
    """A failed poll pings /fail with the error line."""
    cfg, db = setup(tmp_path, pings.url)
    db.unlink()
    assert run_cli("poll", "imessage", config=cfg).returncode == 1
    wait_until(lambda: len(pings.got) >= 2, 10, "two pings")
    assert [p for p, _, _ in pings.got] == ["/ping/3f2a/start", "/ping/3f2a/fail"]
    assert b"poll error" in pings.got[1][2]


def test_skipped_poll_sends_nothing(tmp_path: Path, pings: Pings) -> None:
    """A poll skipped because the previous one runs sends no ping: the next real poll's start is the first request."""
    cfg, _ = setup(tmp_path, pings.url)
    (tmp_path / "state" / "locks").mkdir(parents=True)
    with RunLock(tmp_path / "state" / "locks" / "imessage.poll.lock"):
        assert run_cli("poll", "imessage", config=cfg).returncode == 0
    assert read_log(tmp_path / "state", "imessage")[-1]["status"] == "skipped"
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    wait_until(lambda: len(pings.got) >= 2, 10, "two pings")
    assert [p for p, _, _ in pings.got] == ["/ping/3f2a/start", "/ping/3f2a"]


def test_dead_url_does_not_fail_the_poll(tmp_path: Path) -> None:
    """Nothing listens at the heartbeat URL: the poll still stores everything, exits 0, and logs heartbeat.failed (no URL)."""
    url = f"http://127.0.0.1:{free_port()}/ping/secret-uuid"
    cfg, _ = setup(tmp_path, url)
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    events = read_log(tmp_path / "state", "imessage")
    poll = next(e for e in events if e["event"] == "poll")
    assert poll["status"] == "ok" and poll["new"] == 20
    failed = [e for e in events if e["event"] == "heartbeat.failed"]
    assert sorted(e["ping"] for e in failed) == ["start", "success"]
    log_text = (tmp_path / "state" / "logs" / "imessage.jsonl").read_text()
    assert "secret-uuid" not in log_text and "secret-uuid" not in out.stderr
