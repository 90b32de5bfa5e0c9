"""IMAP ingest: 10,000 messages from a local Dovecot, memex's batched fetch vs one FETCH per message.

The messages are written straight into the test user's Maildir (as an MDA
would; APPEND of 10,000 messages would dominate the run) and Dovecot indexes
them on the first SELECT, which a warm-up pass does before either timing.
Both loops read every message's full raw bytes over the same kind of
connection and render nothing else, so the difference is the protocol:
memex: ``UID SEARCH`` then ``UID FETCH`` of up to 250 UIDs per command
(``BODY.PEEK[]``); naive: one ``UID FETCH n (BODY.PEEK[])`` per message.
Rendering (the record JSON) is timed separately as the poller's full fetch().

Run: .venv/bin/python bench/imap_ingest.py [--messages 10000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pollers.email.imap import poller as imap
from pollers.email.imap import session as imap_session
from tests.servers import dovecot as dv


def sample(i: int) -> bytes:
    """A plausible small email (~1.5 KB)."""
    body = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 20).encode()
    return (
        (
            f"From: Sender {i % 50} <s{i % 50}@example.com>\r\nTo: me@example.com\r\nSubject: bench {i}\r\n"
            f"Date: Tue, 01 Nov 2022 10:{i % 60:02d}:00 +0000\r\nMessage-ID: <bench-{i}@example.com>\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n\r\n"
        ).encode()
        + body
        + b"\r\n"
    )


def fill(server: dv.Dovecot, user: str, n: int, make: Callable[[int], bytes] = sample) -> int:
    """Write ``n`` messages (``make(i)``) into the user's INBOX Maildir (owned by the server's user); their total size."""
    with server.session(user) as conn:  # creates the Maildir
        conn.select("INBOX")
    root = server.maildir(user)
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    base, total = int(time.time()) - n, 0
    for i in range(n):
        path = root / "new" / f"{base + i}.M{i}P1.bench"
        raw = make(i)
        total += len(raw)
        path.write_bytes(raw)
        if os.geteuid() == 0:
            os.chown(path, server.uid, server.gid)
    for sub in ("cur", "new", "tmp"):
        if os.geteuid() == 0:
            os.chown(root / sub, server.uid, server.gid)
    return total


def memex_loop(poller: imap.ImapPoller) -> tuple[int, float]:
    """Every message through the poller's fetch (protocol + rendering); returns (count, seconds)."""
    start = time.perf_counter()
    cursor = None
    count = 0
    while True:
        batch = poller.fetch(cursor, 500)
        count += len(batch.items)
        if not batch.items and batch.cursor == cursor:
            break
        cursor = batch.cursor
    return count, time.perf_counter() - start


def batched_raw(server: dv.Dovecot, user: str, chunk: int) -> tuple[int, int, float]:
    """Protocol only: SEARCH, then UID FETCH ``chunk`` UIDs per command; returns (count, commands, seconds)."""
    conn = server.client(user)
    start = time.perf_counter()
    conn.select("INBOX", readonly=True)
    _, data = conn.uid("SEARCH", "UID 1:*")
    uids = [int(x) for x in data[0].split()]
    commands, count = 2, 0
    for i in range(0, len(uids), chunk):
        part = uids[i : i + chunk]
        _, got = conn.uid("FETCH", f"{part[0]}:{part[-1]}", "(UID BODY.PEEK[])")
        commands += 1
        count += sum(1 for x in got if isinstance(x, tuple))
    elapsed = time.perf_counter() - start
    conn.logout()
    return count, commands, elapsed


def naive_raw(server: dv.Dovecot, user: str) -> tuple[int, int, float]:
    """Protocol only: SEARCH, then one UID FETCH per message; returns (count, commands, seconds)."""
    conn = server.client(user)
    start = time.perf_counter()
    conn.select("INBOX", readonly=True)
    _, data = conn.uid("SEARCH", "UID 1:*")
    commands, count = 2, 0
    for uid in (int(x) for x in data[0].split()):
        _, got = conn.uid("FETCH", str(uid), "(UID BODY.PEEK[])")
        commands += 1
        count += sum(1 for x in got if isinstance(x, tuple))
    elapsed = time.perf_counter() - start
    conn.logout()
    return count, commands, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    server = dv.start()
    try:
        user = server.new_user()
        fill(server, user, args.messages)
        batched_raw(server, user, 1000)  # warm-up: Dovecot indexes the new files, page cache is warm
        settings = imap_session.Settings("127.0.0.1", server.port, "none", user, None, "BENCH_IMAP_PASSWORD", ("INBOX",), 60.0)
        os.environ["BENCH_IMAP_PASSWORD"] = dv.PASSWORD
        poller = imap.ImapPoller("bench", settings)
        count, seconds = memex_loop(poller)
        poller.close()
        b_count, b_cmds, b_secs = batched_raw(server, user, imap.FETCH_CHUNK)
        n_count, n_cmds, n_secs = naive_raw(server, user)
        assert count == b_count == n_count == args.messages, (count, b_count, n_count)
        n = args.messages
        print(f"messages: {n}")
        print(
            f"memex poller fetch (protocol + rendering): {n / seconds:,.0f} msg/s, {poller.commands / n:.4f} round trips/msg ({poller.commands} commands)"
        )
        print(f"batched protocol only ({imap.FETCH_CHUNK}/FETCH):        {n / b_secs:,.0f} msg/s, {b_cmds / n:.4f} round trips/msg")
        print(f"naive one FETCH per message:               {n / n_secs:,.0f} msg/s, {n_cmds / n:.4f} round trips/msg")
        print(f"batched vs naive (protocol only): {n_secs / b_secs:.1f}x faster, {n_cmds / b_cmds:.0f}x fewer round trips")
        print(f"memex poller vs naive protocol-only loop: {n_secs / seconds:.2f}x")
    finally:
        dv.stop(server)


if __name__ == "__main__":
    main()
