"""What a poll with ``state_url`` costs in S3 requests, counted by a real HTTP proxy in front of moto."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3

from memex import config
from pollers.imessage import samples as imessage_samples
from tests.conftest import FaultProxy, read_log, run_cli, write_config

IDLE_POLL_REQUESTS = 4  # docs/hosts.md: lease PUT, cursor GET, claim PUT, release PUT


def _setup(tmp_path: Path, proxy: FaultProxy, bucket: str, host: str = "a") -> tuple[Path, Path]:
    """An iMessage source with 6 messages, objects and state on one bucket behind ``proxy``; (config, chat.db)."""
    db = tmp_path / "chat.db"
    if not db.exists():
        imessage_samples.build(db, 6, seed=3)
    (tmp_path / host).mkdir(exist_ok=True)
    cfg = write_config(tmp_path / host, {"imessage": {"type": "imessage", "db": str(db)}},
                       store={"url": f"s3://{bucket}/store", "endpoint_url": proxy.url}, state_url=f"s3://{bucket}/state")  # fmt: skip
    return cfg, db


def _poll(cfg: Path, proxy: FaultProxy, host: str = "a") -> list[tuple[str, str]]:
    """One ``memex poll imessage`` (exit 0, nothing on stdout or stderr); the requests it made."""
    before = len(proxy.requests)
    out = run_cli("poll", "imessage", config=cfg, env={"MEMEX_HOST": host})
    assert (out.returncode, out.stdout, out.stderr) == (0, "", ""), out.stderr
    return proxy.requests[before:]


def test_an_idle_poll_with_state_url_costs_at_most_four_requests(tmp_path: Path, proxy: FaultProxy, s3_bucket: str) -> None:
    """Nothing new, same host as last time: lease PUT (If-Match on the release it remembers), one cursor GET, claim PUT, release PUT.

    The naive acquire reads the lease and the cursor object three times: 7 requests.
    """
    cfg, _ = _setup(tmp_path, proxy, s3_bucket)
    _poll(cfg, proxy)  # stores the 6 messages and creates the cursor and lease objects
    for _ in range(2):
        idle = _poll(cfg, proxy)
        assert len(idle) <= IDLE_POLL_REQUESTS, idle
        assert idle == [("PUT", "state/leases/imessage.json"), ("GET", "state/cursors/imessage.json"),
                        ("PUT", "state/cursors/imessage.json"), ("PUT", "state/leases/imessage.json")]  # fmt: skip
    last = read_log(tmp_path / "a" / "state", "imessage")[-1]
    assert (last["event"], last["status"], last["lease_epoch"]) == ("poll", "idle", 3)


def test_another_hosts_release_costs_two_requests_more_and_the_cursor_stays_exact(
    tmp_path: Path, proxy: FaultProxy, s3_bucket: str
) -> None:
    """Two hosts take turns: the one whose remembered release is stale meets 412 and reads the lease (6 requests when idle), and polls right.

    New messages between the turns are stored once and the cursor ends at the last one.
    """
    cfg_a, db = _setup(tmp_path, proxy, s3_bucket, "a")
    cfg_b, _ = _setup(tmp_path, proxy, s3_bucket, "b")
    _poll(cfg_a, proxy, "a")
    _poll(cfg_b, proxy, "b")  # b has no memo: reads the lease
    imessage_samples.append(db, 3, seed=9)
    busy = _poll(cfg_a, proxy, "a")  # a's memo is stale (b wrote the lease since)
    assert busy[:2] == [("PUT", "state/leases/imessage.json"), ("GET", "state/leases/imessage.json")], busy
    assert read_log(tmp_path / "a" / "state", "imessage")[-1]["new"] == 3
    assert len(_poll(cfg_b, proxy, "b")) == IDLE_POLL_REQUESTS + 2  # b's memo is stale too: the refused PUT and a GET more
    s3 = boto3.client("s3", endpoint_url=proxy.upstream if proxy.upstream.startswith("http") else f"http://{proxy.upstream}")
    section = json.loads(s3.get_object(Bucket=s3_bucket, Key="state/cursors/imessage.json")["Body"].read())["section"]
    assert section["positions"] == {"rowid": 9} and section["epoch"] == 4
    assert len([k for k in s3.list_objects_v2(Bucket=s3_bucket, Prefix="store/messages/").get("Contents", [])]) == 9


def test_a_write_judged_on_a_remembered_copy_reads_the_object_before_it_decides_nothing_changes(s3_endpoint: str, s3_bucket: str,
                                                                                              tmp_path: Path) -> None:  # fmt: skip
    """A store remembers what it wrote (its next write then needs no GET); another writer changes the object since. A change that
    is a no-op on the remembered copy is not a no-op on the object: the store reads it and writes, it does not skip the write.
    """
    from memex.state.s3state import S3CursorStore, open_state

    cfg = config.load(write_config(tmp_path, {}, store={"url": f"s3://{s3_bucket}/store", "endpoint_url": s3_endpoint},
                                   state_url=f"s3://{s3_bucket}/state"))  # fmt: skip
    mine, theirs = S3CursorStore(open_state(cfg)), S3CursorStore(open_state(cfg))

    def setting(value: int) -> Any:
        return lambda section: {**section, "k": value}

    mine.update("src", setting(1))
    theirs.update("src", setting(2))
    mine.update("src", setting(1))  # on the remembered copy k is 1 already
    assert S3CursorStore(open_state(cfg)).section("src")["k"] == 1
