"""Teams: a first sync of 20,000 messages in 50 chats (pages of 50) from the local Graph stand-in, then an incremental poll.

Three readers over the same HTTPS server (tests/servers/graph.py), in one run:

* memex poll: ``memex.runner.poll`` end to end (list chats, walk each chat
  with ``$orderby``/``$filter``, render, store into a file store, cursor);
* memex fetch: the poller's ``fetch`` loop alone (walk and render, nothing stored);
* naive: for each chat, ``GET /me/chats/{id}/messages?$top=50`` following
  ``@odata.nextLink`` to the end, JSON decoded, nothing rendered (no ``$filter``).

Then 100 new messages arrive in 10 chats and each reader runs again: the
naive loop has no cursor, so it reads every message again. Reported:
messages per second and HTTP requests per message (requests counted by the
server), with the ratios.

Run: .venv/bin/python bench/teams_sync.py [--chats 50] [--per-chat 400]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memex import config as config_mod
from memex.registry import make_poller
from memex.runner import poll
from tests.servers.graph import ME, TENANT, GraphServer


def write_config(root: Path, server: GraphServer) -> config_mod.Config:
    """A teams source pointed at the stand-in, with a file store."""
    path = root / "config.toml"
    path.write_text(
        f'state_dir = "{root / "state"}"\n[store]\nurl = "{(root / "store").as_uri()}"\n[sources.teams]\ntype = "teams"\n'
        f'client_id = "{server.client_id}"\ntenant = "{TENANT}"\nauthority = "{server.base}"\ngraph_url = "{server.graph}"\n'
    )
    return config_mod.load(path)


def naive(server: GraphServer, token: str) -> int:
    """Every message of every chat, no cursor: the loop a first script would write. Returns messages read."""
    import requests

    session = requests.Session()
    headers = {"Authorization": f"Bearer {token}"}
    n = 0
    for chat_id in list(server.chats):
        url: str | None = f"{server.graph}/me/chats/{chat_id}/messages?$top=50"
        while url:
            doc = session.get(url, headers=headers, timeout=30).json()
            n += len(doc["value"])
            url = doc.get("@odata.nextLink")
    session.close()
    return n


def fetch_only(cfg: config_mod.Config, cursor: object) -> tuple[int, object]:
    """The poller's fetch loop from ``cursor`` to caught up, nothing stored. Returns (items, final cursor)."""
    poller = make_poller(cfg.source("teams"))
    n = 0
    try:
        while True:
            batch = poller.fetch(cursor, 500)
            n += len(batch.items)
            if not batch.items and batch.cursor == cursor:
                return n, cursor
            cursor = batch.cursor
    finally:
        poller.close()


def measure(server: GraphServer, label: str, fn: object) -> tuple[float, int, int]:
    """Run ``fn`` (returns messages read); return (seconds, messages, requests)."""
    before = len(server.log)
    start = time.perf_counter()
    n = fn()  # type: ignore[operator]
    took = time.perf_counter() - start
    requests = len(server.log) - before
    print(f"  {label:<12} {n:>6} msgs  {took:6.2f} s  {n / took if took else 0:8.0f} msg/s  {requests:>5} requests  "
          f"{requests / n if n else float('inf'):.3f} req/msg", flush=True)  # fmt: skip
    return took, n, requests


def main() -> None:
    """Fill the stand-in, run the three readers twice, print the figures and ratios."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=50)
    ap.add_argument("--per-chat", type=int, default=400)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="memex-bench-teams-") as tmp, GraphServer(Path(tmp)) as server:
        root = Path(tmp)
        os.environ["REQUESTS_CA_BUNDLE"] = str(server.cert)
        chats = [f"19:{i:032x}@thread.v2" for i in range(args.chats)]
        for cid in chats:
            server.add_chat(cid, topic=f"chat {cid[3:9]}", members=[(ME, "Megan Bowen"), ("u-2", "Adele Vance")])
        for j in range(args.per_chat):
            for cid in chats:
                server.post(cid, f"<p>message {j} in a chat about the quarterly plan</p>", html=True, step=0.5)
        cfg = write_config(root, server)
        poller = make_poller(cfg.source("teams"))
        poller.authenticate(lambda _line: None)  # type: ignore[attr-defined]
        token = poller.login.token()  # type: ignore[attr-defined]
        poller.close()
        total = args.chats * args.per_chat
        print(f"first sync: {total} messages in {args.chats} chats, pages of 50")
        _, _, naive_req = naive_t = measure(server, "naive", lambda: naive(server, token))
        fetch_t = measure(server, "memex fetch", lambda: fetch_only(cfg, None)[0])
        poll_t = measure(server, "memex poll", lambda: poll(cfg, "teams", max_seconds=3600).new)
        print(f"  ratios: memex poll / naive msg/s {(poll_t[1] / poll_t[0]) / (naive_t[1] / naive_t[0]):.2f}x, "
              f"memex fetch / naive msg/s {(fetch_t[1] / fetch_t[0]) / (naive_t[1] / naive_t[0]):.2f}x, "
              f"requests memex/naive {poll_t[2] / naive_req:.2f}x")  # fmt: skip
        for cid in chats[:10]:
            for j in range(10):
                server.post(cid, f"new {j}", step=0.5)
        print("incremental: 100 new messages in 10 chats")
        inc_naive = measure(server, "naive", lambda: naive(server, token))
        inc_poll = measure(server, "memex poll", lambda: poll(cfg, "teams", max_seconds=3600).new)
        print(f"  ratios: requests naive/memex {inc_naive[2] / inc_poll[2]:.1f}x, wall naive/memex {inc_naive[0] / inc_poll[0]:.1f}x "
              f"(memex stored {inc_poll[1]}, naive re-read {inc_naive[1]})")  # fmt: skip


if __name__ == "__main__":
    main()
