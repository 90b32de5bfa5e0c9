"""``start = "now"`` never skips a message: only a never-polled, never-backfilled source starts at its head.

After ``cursor reset`` the next poll reads from the beginning (as the command says); after a backfill
the first live poll starts where the backfill's walk began, so history and live meet with no gap.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pollers.imessage import samples as imessage_samples
from tests.conftest import file_objects, read_log, run_cli, write_config
from tests.email.test_maildir import deliver, mail, make_maildir


def stored_ids(state: Path) -> list[str]:
    """Native IDs of every stored message record (a list: a second copy would show)."""
    return sorted(json.loads(b)["native_id"] for k, b in file_objects(state / "store").items() if k.endswith(".json"))


def poll(config: Path, source: str) -> dict[str, Any]:
    """Run one poll through the CLI; its summary line."""
    out = run_cli("poll", source, config=config)
    assert out.returncode == 0, out.stderr
    return [e for e in read_log(config.parent / "state", source) if e["event"] == "poll"][-1]


class Chat:
    """An iMessage chat.db source with ``start = "now"``."""

    name = "imessage"

    def __init__(self, tmp_path: Path, count: int) -> None:
        self.db = tmp_path / "chat.db"
        imessage_samples.build(self.db, count, seed=3)
        self.config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(self.db), "start": "now"}})
        self.seed = 10

    def add(self, n: int) -> None:
        """``n`` more messages arrive."""
        self.seed += 1
        imessage_samples.append(self.db, n, seed=self.seed)

    def ids(self) -> list[str]:
        """Every message's native ID in the source."""
        conn = sqlite3.connect(self.db)
        try:
            return sorted(g for (g,) in conn.execute("SELECT guid FROM message"))
        finally:
            conn.close()


class Mails:
    """A Maildir source with ``start = "now"``."""

    name = "md"

    def __init__(self, tmp_path: Path, count: int) -> None:
        self.root = make_maildir(tmp_path / "Maildir")
        self.n = 0
        self.add(count)
        table = {"type": "maildir", "path": str(self.root), "settle_seconds": 0, "start": "now"}
        self.config = write_config(tmp_path, {"md": table})

    def add(self, n: int) -> None:
        """``n`` more mails arrive."""
        for _ in range(n):
            self.n += 1
            deliver(self.root, f"{1700000000 + self.n}.M{self.n}P1.host", mail(self.n))

    def ids(self) -> list[str]:
        """Every mail's native ID."""
        return sorted(f"m{i}@example.com" for i in range(1, self.n + 1))


SOURCES = [pytest.param(Chat, id="imessage"), pytest.param(Mails, id="maildir")]


@pytest.mark.parametrize("kind", SOURCES)
def test_reset_then_poll_reads_from_the_beginning(tmp_path: Path, kind: type[Chat] | type[Mails]) -> None:
    """start = "now", polled, then ``cursor reset``: the next poll re-reads the whole source, storing what it had skipped."""
    src = kind(tmp_path, 40)
    assert poll(src.config, src.name)["new"] == 0  # never polled: starts at the head, history left to backfill
    src.add(3)
    assert poll(src.config, src.name)["new"] == 3
    out = run_cli("cursor", "reset", src.name, "--yes", config=src.config)
    assert out.returncode == 0, out.stderr
    after = poll(src.config, src.name)
    assert (after["new"], after["dup"]) == (40, 3)
    assert stored_ids(tmp_path / "state") == src.ids()
    events = [e["event"] for e in read_log(tmp_path / "state", src.name)]
    assert events.count("cursor.start_now") == 1 and "cursor.start_after_reset" in events


@pytest.mark.parametrize("kind", SOURCES)
def test_first_live_poll_after_a_backfill_starts_where_the_walk_began(tmp_path: Path, kind: type[Chat] | type[Mails]) -> None:
    """Backfill a never-polled start = "now" source, then messages arrive: the first cron poll stores them (no gap)."""
    src = kind(tmp_path, 50)
    out = run_cli("backfill", src.name, config=src.config)
    assert out.returncode == 0, out.stderr
    src.add(7)
    first = poll(src.config, src.name)
    assert first["new"] == 7
    assert stored_ids(tmp_path / "state") == src.ids()
    assert poll(src.config, src.name)["status"] == "idle"
    section = json.loads((tmp_path / "state" / "cursors.json").read_text())["sources"][src.name]
    assert section["backfill"]["live_start"] is not None


def test_backfill_of_an_old_window_still_sets_where_live_polling_begins(tmp_path: Path) -> None:
    """A backfill whose window holds nothing still records the head it started at; the first cron poll starts there."""
    src = Chat(tmp_path, 30)
    out = run_cli("backfill", src.name, "--until", "2000-01-01", config=src.config)  # walks nothing, records the head
    assert out.returncode == 0, out.stderr
    src.add(4)
    assert poll(src.config, src.name)["new"] == 4  # the 30 older ones are history: outside the backfill's window
