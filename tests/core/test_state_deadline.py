"""Exit codes tell the truth when S3 freezes mid-poll (SIGSTOP on a moto server of the test's own).

A cursor that could not be saved is an error of its own (exit 1, one line naming the cursor object), never the
normal stop at ``--max-seconds``; a cursor that was saved is reported as what it is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3

from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, Gate, moto_process, read_log, write_config

MAX_SECONDS = 10.0  # long enough for a loaded machine to reach the held item before the time limit
MESSAGES = 6
HELD_AT = 3  # two messages are stored when S3 freezes


@contextmanager
def frozen_s3(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A moto server of this test's own (never the shared one: it is going to be stopped) with a bucket; (URL, process)."""
    with moto_process(tmp_path / "moto.log") as (url, proc):
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket="frozen")
        yield url, proc


def poll_with_s3_frozen_at_the_held_item(tmp_path: Path, config: Path, server: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    """``memex poll imessage --max-seconds 10``, held at the 3rd message; S3 is stopped there, then the hold lets go.

    The S3 server stays stopped until the poll ends; (exit code, stdout, stderr).
    """
    gate = Gate(tmp_path, HELD_AT)
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(config), "poll", "imessage", "--max-seconds", str(MAX_SECONDS)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=gate.env())  # fmt: skip
    try:
        gate.wait_held(proc)
        os.kill(server.pid, signal.SIGSTOP)
        gate.open()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    os.kill(server.pid, signal.SIGCONT)
    return proc.returncode, out, err


def _source(tmp_path: Path) -> dict[str, Any]:
    db = tmp_path / "chat.db"
    imessage_samples.build(db, MESSAGES, seed=7)
    return {"imessage": {"type": "imessage", "db": str(db)}}


def test_a_cursor_save_that_misses_the_state_deadline_is_an_error_naming_the_object(tmp_path: Path) -> None:
    """S3 (objects and state_url) frozen mid-poll: the poll ends after its time limit plus the saving time, exit 1, one JSON line
    naming ``state/cursors/imessage.json``; the log says error, never ok, and no cursor was saved.

    The naive handler takes the saving deadline for the poll's normal stop: ``status: ok``, exit 0, cursor unsaved.
    """
    with frozen_s3(tmp_path) as (url, server):
        cfg = write_config(
            tmp_path, _source(tmp_path), store={"url": "s3://frozen/store", "endpoint_url": url}, state_url="s3://frozen/state"
        )
        code, out, err = poll_with_s3_frozen_at_the_held_item(tmp_path, cfg, server)
        assert (code, out) == (1, ""), err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        event = json.loads(lines[0])
        assert (event["event"], event["status"], event["level"], event["new"]) == ("poll", "error", "error", HELD_AT - 1)
        assert "s3://frozen/state/cursors/imessage.json" in event["error"] and "the cursor is not saved" in event["error"]
        assert read_log(tmp_path / "state", "imessage")[-1]["status"] == "error"
        section = json.loads(
            boto3.client("s3", endpoint_url=url).get_object(Bucket="frozen", Key="state/cursors/imessage.json")["Body"].read()
        )
        assert "cursor" not in section["section"]  # only the lease's claim got there


def test_with_local_state_a_frozen_store_ends_the_poll_with_the_cursor_saved_for_what_was_stored(tmp_path: Path) -> None:
    """Local state, S3 store frozen mid-poll: the poll stops at its time limit, saves the cursor for the 2 stored messages and
    says so (exit 0, nothing printed, ``stopped: deadline``); the next poll stores the other 4 (the PUT cut off at the freeze
    may land once S3 resumes: a duplicate then, never a loss).
    """
    with frozen_s3(tmp_path) as (url, server):
        cfg = write_config(tmp_path, _source(tmp_path), store={"url": "s3://frozen/store", "endpoint_url": url})
        code, out, err = poll_with_s3_frozen_at_the_held_item(tmp_path, cfg, server)
        assert (code, out, err) == (0, "", "")
        first = read_log(tmp_path / "state", "imessage")[-1]
        assert (first["status"], first["stopped"], first["new"]) == ("ok", "deadline", HELD_AT - 1)
        saved = json.loads((tmp_path / "state" / "cursors.json").read_text())["sources"]["imessage"]
        assert saved["positions"] == first["positions_after"] == {"rowid": HELD_AT - 1}
        again = subprocess.run([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
        assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
        second = read_log(tmp_path / "state", "imessage")[-1]
        assert second["new"] + second["dup"] == MESSAGES - HELD_AT + 1 and second["dup"] <= 1
        stored = boto3.client("s3", endpoint_url=url).list_objects_v2(Bucket="frozen", Prefix="store/messages/")["Contents"]
        assert len(stored) == MESSAGES
