"""One voice for every command, as cron runs it: no terminal, stdin closed.

A success prints nothing a user did not ask for: stdout holds only a command's own output (``cursor show``,
``status``, ``tail``), stderr is empty, and whatever does reach stderr (a warning, an error) is one JSON line per
event, also written to the source's ``logs/<source>.jsonl``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3

from memex import config
from memex.state.s3lease import read_lease
from memex.state.s3state import open_state
from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, read_log, wait_until, write_config
from tests.email.test_maildir import deliver, mail, make_maildir

QUIET = ("poll imessage", "poll imessage", "poll md", "poll --all", "backfill imessage", "backfill imessage")
OUTPUT = ("cursor show", "cursor show imessage --json", "status", "status --json", "tail", "tail --json")


def cli(cfg: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``memex ARGS`` off a terminal with stdin closed (as cron runs it)."""
    return subprocess.run([sys.executable, "-m", "memex", "--config", str(cfg), *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)  # fmt: skip


def sources(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """An iMessage chat.db with 5 messages and a Maildir with 3 mails."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 5, seed=11)
    root = make_maildir(tmp_path / "Maildir")
    for n in range(1, 4):
        deliver(root, f"{1700000000 + n}.M{n}P1.host", mail(n))
    return {"imessage": {"type": "imessage", "db": str(db)}, "md": {"type": "maildir", "path": str(root), "settle_seconds": 0}}


def every_command_is_quiet(cfg: Path) -> None:
    """Run each command once: exit 0, nothing on stderr; stdout empty unless it is the command's output (then no log line in it)."""
    for line in QUIET:
        out = cli(cfg, *line.split())
        assert (out.returncode, out.stdout, out.stderr) == (0, "", ""), f"memex {line}: {out.stdout}{out.stderr}"
    for line in OUTPUT:
        out = cli(cfg, *line.split())
        assert (out.returncode, out.stderr) == (0, ""), f"memex {line}: {out.stderr}"
        assert out.stdout and "lease." not in out.stdout and "[warning" not in out.stdout, f"memex {line}: {out.stdout}"
    assert json.loads(cli(cfg, "cursor", "show", "imessage", "--json").stdout) is not None
    watch = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "watch", "imessage", "md"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    try:
        state = cfg.parent / "state"
        wait_until(lambda: all(any(e.get("trigger") == "start" for e in read_log(state, s)) for s in ("imessage", "md")), 60,
                   "memex watch to poll both sources")  # fmt: skip
        watch.send_signal(signal.SIGTERM)
        out, err = watch.communicate(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate(timeout=30)
    assert (watch.returncode, out, err) == (0, "", "")


def test_every_command_off_a_terminal_prints_nothing_on_success(tmp_path: Path) -> None:
    """Local state: poll (iMessage, Maildir, --all), backfill, watch, cursor show, status and tail print nothing they were not asked
    for; a failing poll's stderr is JSON lines only (the log's error line), stdout still empty.
    """
    cfg = write_config(tmp_path, sources(tmp_path))
    every_command_is_quiet(cfg)
    (tmp_path / "broken").mkdir()
    broken = write_config(tmp_path / "broken", {"imessage": {"type": "imessage", "db": str(tmp_path / "missing.db")}})
    out = cli(broken, "poll", "imessage")
    assert out.returncode == 1 and out.stdout == "" and out.stderr
    assert all(json.loads(line)["level"] == "error" for line in out.stderr.splitlines())


def test_every_command_with_state_on_s3_prints_nothing_and_leases_log_to_the_source_log(tmp_path: Path, s3_endpoint: str,
                                                                                         s3_bucket: str) -> None:  # fmt: skip
    """With ``state_url``: the same commands are as quiet (the second poll's lease takeover once printed a console line to stdout);
    ``lease.taken_over`` after this host's clean release is an info line in ``logs/imessage.jsonl``, never on a console.
    """
    cfg = write_config(tmp_path, sources(tmp_path), store={"url": f"s3://{s3_bucket}/store", "endpoint_url": s3_endpoint},
                       state_url=f"s3://{s3_bucket}/state")  # fmt: skip
    every_command_is_quiet(cfg)
    taken = [e for e in read_log(tmp_path / "state", "imessage") if e["event"] == "lease.taken_over"]
    assert taken and all(e["level"] == "info" and e["previous_released"] is True for e in taken)
    assert {e["lease"].rsplit("/", 1)[-1] for e in taken} == {"imessage.json", "imessage.backfill.json"}


def test_a_lease_taken_from_a_holder_that_did_not_release_is_a_warning_naming_it(tmp_path: Path, s3_endpoint: str,
                                                                                  s3_bucket: str) -> None:  # fmt: skip
    """A lease left by a holder that never released it (it died) is taken once expired: a warning naming its host and pid, in the
    source log and as one JSON line on stderr; the poll itself succeeds (exit 0, stdout empty).
    """
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 3, seed=12)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}},
                       store={"url": f"s3://{s3_bucket}/store", "endpoint_url": s3_endpoint}, state_url=f"s3://{s3_bucket}/state")  # fmt: skip
    dead = {"host": "old-laptop", "pid": 4242, "epoch": 5, "ttl": 1, "acquired_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    boto3.client("s3", endpoint_url=s3_endpoint).put_object(Bucket=s3_bucket, Key="state/leases/imessage.json", Body=json.dumps(dead))
    state = open_state(config.load(cfg))
    wait_until(lambda: not read_lease(state, "leases/imessage.json")[0].live, 20, "the dead holder's lease to expire")  # type: ignore[index]
    out = cli(cfg, "poll", "imessage")
    assert (out.returncode, out.stdout) == (0, ""), out.stderr
    (line,) = out.stderr.splitlines()
    event = json.loads(line)
    assert (event["event"], event["level"], event["previous_host"], event["previous_pid"]) == (
        "lease.taken_over",
        "warning",
        "old-laptop",
        4242,
    )
    assert event["previous_released"] is False and event["epoch"] == 6
    assert event in read_log(tmp_path / "state", "imessage")


LIBRARY_WARNING = """
import logging
from memex.liblog import route_library_logs
route_library_logs()
logging.getLogger("urllib3.connectionpool").warning("Connection pool is full, discarding connection: %s", "secret-host.example")
logging.getLogger("botocore.credentials").info("Found credentials in environment variables.")
logging.getLogger("urllib3.connectionpool").warning("Retrying (%r) after connection broken by '%r': %s", object(),
                                                    ConnectionRefusedError(111, "Connection refused"), "/tenant/v2.0/x?code=secret-code")
"""


def test_a_librarys_warning_is_one_json_line_with_its_arguments_shown_safely() -> None:
    """A library's own ``logging`` warning (urllib3's full pool, its retry) reaches stderr as one JSON line naming the logger,
    its template filled in safely: a host or key as ``...``, an exception by type and system message, a URL's path without
    its query, never a bare ``%r``; info records stay out. Unrouted, it was a bare text line.
    """
    out = subprocess.run([sys.executable, "-c", LIBRARY_WARNING], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                         cwd=ROOT)  # fmt: skip
    assert (out.returncode, out.stdout) == (0, ""), out.stderr
    line, retry = out.stderr.splitlines()
    event = json.loads(line)
    assert (event["event"], event["logger"], event["level"]) == ("library.log", "urllib3.connectionpool", "warning")
    assert event["message"] == "Connection pool is full, discarding connection: ..." and "secret-host" not in line
    assert json.loads(retry)["message"] == (
        "Retrying (object) after connection broken by 'ConnectionRefusedError: Connection refused': /tenant/v2.0/x"
    )
    assert "secret-code" not in retry and "%r" not in retry


ALLOWED_TO_PRINT = (
    "memex/cli/",
    "memex/observe/logs.py",
    "memex/liblog.py",
    "memex/error_lines.py",
)  # error_lines: the one module of the user's error lines


def test_no_module_prints_or_logs_around_the_pipeline() -> None:
    """No module of the core or a poller calls ``print``, imports structlog or makes a ``logging`` logger of its own: events go
    through :mod:`memex.observe.logs` (the CLI, which prints its own output, and the sink itself excepted).
    """
    import ast

    offenders = []
    for path in sorted([*(ROOT / "memex").rglob("*.py"), *(ROOT / "pollers").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
                and not rel.startswith(ALLOWED_TO_PRINT)
            ):
                offenders.append(f"{rel}:{node.lineno}: print")
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
                if any(n.split(".")[0] == "structlog" for n in names):
                    offenders.append(f"{rel}:{node.lineno}: structlog")
            if isinstance(node, ast.Attribute) and node.attr == "getLogger" and rel != "memex/liblog.py":
                offenders.append(f"{rel}:{node.lineno}: logging.getLogger")
    assert offenders == []
