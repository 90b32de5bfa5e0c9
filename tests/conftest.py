"""Shared fixtures: a real S3 endpoint (moto server mode, over HTTP), configs, and the CLI as a subprocess."""

from __future__ import annotations

import functools
import http.client
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI_TIMEOUT = 120.0

# moto's server accepts any credentials; set them so boto3 never looks elsewhere.
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
for _k, _v in FAKE_AWS.items():
    os.environ.setdefault(_k, _v)


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need_strace() -> None:
    """Skip without strace locally; on CI its absence is a failure (a skipped durability test proves nothing)."""
    import shutil

    if shutil.which("strace") is None:
        if os.environ.get("CI"):
            raise AssertionError("strace is missing on CI")
        pytest.skip("strace is not installed")


def need_syncfs(folder: Path) -> None:
    """Skip a test that kills a poll at its ``syncfs`` where ``folder``'s file system gets the per-file flush instead."""
    from memex.state.flush import SYNCFS, flush_plan

    method, fs = flush_plan(folder)
    if method != SYNCFS:
        pytest.skip(f"{folder} is on {fs}, whose batches get an fsync per file: no syncfs to kill the poll at")


# How long a test waits for a condition, as a share of its deadline. The mutant table (test_mutants.py) sets 0.25:
# under a mutant the awaited condition typically never comes, so a shorter wait only fails sooner. Never below 10 s.
PATIENCE = float(os.environ.get("MEMEX_TEST_PATIENCE", "1"))


def patience(timeout: float) -> float:
    """``timeout`` scaled by :data:`PATIENCE` (unchanged at 1; at least 10 s when shortened)."""
    return timeout if PATIENCE >= 1 else max(10.0, timeout * PATIENCE)


def wait_until(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    """Call ``predicate`` until it returns a truthy value or ``timeout`` passes (then fail naming ``what``)."""
    timeout = patience(timeout)
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Log:
    """A logger that keeps the events it is given (names and fields), for tests of library code that logs
    (an uploader, the search index's follower): ``info`` and ``warning``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        """Record an info event."""
        self.events.append((event, kw))

    warning = info


class Gate:
    """A hold on the ``at``-th item a memex process stores (:mod:`memex.hold`): the process waits there for :meth:`open`.

    Give a process :meth:`env`, wait with :meth:`wait_held` until it is provably mid-poll (or mid-backfill),
    signal or kill it, then :meth:`open` the gate (a held poll also lets go when it is asked to stop or runs
    out of time). One gate per process: a second process given the same gate would not hold.
    """

    def __init__(self, folder: Path, at: int, name: str = "gate") -> None:
        self.path = folder / name
        self.held_path = folder / f"{name}.held"
        self.at = at

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this environment without MEMEX_CONFIG) with the hold added."""
        env = dict(base) if base is not None else {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
        env["MEMEX_TEST_HOLD"] = f"{self.at}:{self.path}"
        return env

    def wait_held(self, proc: subprocess.Popen[Any] | None = None, timeout: float = 120.0) -> int:
        """Wait until the process holds its item (failing at once if ``proc`` ended first); the holder's pid."""

        def held() -> bool:
            if self.held_path.exists():
                return True
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"the process ended (exit {proc.returncode}) before it reached item {self.at}")
            return False

        wait_until(held, timeout, f"a memex process to hold item {self.at}", interval=0.01)
        return int(self.held_path.read_text())

    def open(self) -> None:
        """Let the held process go on."""
        self.path.touch()


@contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """Run a moto S3 server in its own process on a free loopback port (output to ``log``); yield its URL."""
    with moto_process(log) as (url, _proc):
        yield url


@contextmanager
def moto_process(log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """:func:`moto_server`, yielding (URL, process): for a test that stops it (SIGSTOP); it is resumed before it is ended."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.servers.moto", "127.0.0.1", str(port)], stdout=out, cwd=ROOT,
                                stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"moto server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                return True
        except OSError:
            return False

    try:
        wait_until(up, 30, "moto server to listen")
        yield url, proc
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server shared by the session, over real HTTP; yields its URL."""
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as url:
        yield url


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket on the moto server."""
    import boto3

    name = f"memex-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name


def s3_objects(endpoint: str, bucket: str, prefix: str = "") -> dict[str, bytes]:
    """Every object under ``prefix`` in ``bucket``, key to bytes."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    out: dict[str, bytes] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            out[obj["Key"]] = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    return out


def file_objects(root: Path, prefix: str = "messages/") -> dict[str, bytes]:
    """Every finished object below ``root/prefix`` of a file store, key to bytes (temp files excluded)."""
    out: dict[str, bytes] = {}
    base = root / prefix
    if not base.exists():
        return out
    for path in base.rglob("*"):
        if path.is_file() and not path.name.endswith(".tmp"):
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def write_config(tmp_path: Path, sources: dict[str, dict[str, Any]], store: dict[str, Any] | None = None, **top: Any) -> Path:
    """Write a config.toml under ``tmp_path`` (state in ``tmp_path/state``) and return its path."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return str(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(str(v))

    lines = [f"state_dir = {value(top.pop('state_dir', tmp_path / 'state'))}"]
    lines += [f"{k} = {value(v)}" for k, v in top.items()]
    if store:
        lines.append("[store]")
        lines += [f"{k} = {value(v)}" for k, v in store.items()]
    for name, table in sources.items():
        lines.append(f"[sources.{name}]")
        lines += [f"{k} = {value(v)}" for k, v in table.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_cli(*args: str, config: Path | None = None, env: dict[str, str] | None = None, timeout: float = CLI_TIMEOUT,
            input: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run ``python -m memex ARGS`` in a subprocess; every run has a deadline."""
    cmd = [sys.executable, "-m", "memex"]
    if config is not None:
        cmd += ["--config", str(config)]
    full_env = {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    full_env.update(env or {})
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout, env=full_env, cwd=ROOT, input=input)


def read_log(state_dir: Path, source: str) -> list[dict[str, Any]]:
    """Every event of a source's JSON-lines log, oldest first."""
    path = state_dir / "logs" / f"{source}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# (method, object key) -> None (forward), "500"/"503"/"403", "close" (drop unanswered), or "lost" (forward, then drop the answer)
Rule = Callable[[str, str], str | None]


class FaultProxy:
    """A real HTTP proxy on loopback that forwards to S3 and, per a rule, answers errors or drops connections."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.rule: Rule = lambda _m, _k: None
        self.delay = 0.0  # seconds added to every PUT (makes a run long enough to interrupt)
        self.faults: list[tuple[str, str]] = []
        self.puts = 0  # PUTs seen, counted before the rule is asked (a rule may read it)
        self.requests: list[tuple[str, str]] = []  # every request seen: (method, object key), in order
        self.lock = threading.Lock()
        proxy = self
        local = threading.local()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _any(self) -> None:
                body = self._body()
                key = self.path.split("?")[0].split("/", 2)[-1]
                if self.command == "PUT" and proxy.delay:
                    time.sleep(proxy.delay)
                with proxy.lock:
                    proxy.requests.append((self.command, key))
                    if self.command == "PUT":
                        proxy.puts += 1
                fault = proxy.rule(self.command, key)
                if fault is not None:
                    with proxy.lock:
                        proxy.faults.append((fault, key))
                    if fault == "lost":
                        self._forward(body)  # the server applies it; the client never hears back
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    if fault == "close":
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    code = {"403": "AccessDenied", "500": "InternalError", "503": "ServiceUnavailable"}.get(fault, "InternalError")
                    payload = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
                    self.send_response(int(fault))
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                status, resp_headers, data = self._forward(body)
                self.send_response(status)
                for k, v in resp_headers:
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
                conn = getattr(local, "conn", None)
                if conn is None:
                    conn = local.conn = http.client.HTTPConnection(proxy.upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "connection", "expect")}
                headers["Content-Length"] = str(len(body))
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                except (OSError, http.client.HTTPException):
                    local.conn = None
                    raise
                return resp.status, resp.getheaders(), data

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def put_fault(proxy: FaultProxy, when: Callable[[int], bool], fault: str = "500") -> Rule:
    """A rule answering ``fault`` to the n-th PUT through ``proxy`` whenever ``when(n)``."""
    return lambda method, _key: fault if method == "PUT" and when(proxy.puts) else None


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[FaultProxy]:
    """A fault proxy in front of the session's moto server."""
    with FaultProxy(s3_endpoint) as p:
        yield p


@pytest.fixture(scope="session")
def seaweed_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real SeaweedFS S3 gateway shared by the session; yields its URL."""
    from tests.servers.seaweed import seaweed_server

    with seaweed_server(tmp_path_factory.mktemp("seaweed")) as url:
        yield url


@pytest.fixture(params=["moto", "seaweedfs"])
def any_s3(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(endpoint, fresh bucket) on each S3 server in turn: moto's mock, then SeaweedFS, a real object store."""
    name = f"memex-{uuid.uuid4().hex[:12]}"
    if request.param == "moto":
        endpoint = request.getfixturevalue("s3_endpoint")
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    else:
        from tests.servers.seaweed import create_bucket

        endpoint = request.getfixturevalue("seaweed_endpoint")
        create_bucket(endpoint, name)
    return endpoint, name


@functools.cache
def _reference_validator() -> Any:
    """jsonschema's Draft 2020-12 validator for the shipped schema file (built once per test process)."""
    import jsonschema

    from memex.schema import schema

    return jsonschema.Draft202012Validator(schema())


def assert_valid(objects: dict[str, Any] | list[Any]) -> list[dict[str, Any]]:
    """Every stored record and revision in ``objects`` conforms to the published schema; return them parsed.

    ``objects`` is what a test read back from a store (key to bytes: only ``messages/`` and ``revisions/`` JSON
    objects are records; blobs, quarantine entries and attachments are left out) or a list of record bodies.
    The check is ``jsonschema``'s Draft 2020-12 validator on the shipped file (the reference implementation,
    not the core's own fastjsonschema), so the core and the published file cannot drift apart unnoticed.
    At least one record must be there: a test that stored nothing proves nothing.
    """
    if isinstance(objects, dict):
        bodies = [b for k, b in objects.items() if k.endswith(".json") and k.startswith(("messages/", "revisions/"))]
    else:
        bodies = list(objects)
    assert bodies, "no stored record to validate"
    validator = _reference_validator()
    docs = [json.loads(body) if isinstance(body, bytes | str) else body for body in bodies]
    for doc in docs:
        errors = [f"{e.json_path}: {e.validator}" for e in validator.iter_errors(doc)]  # the rule, not the value
        assert not errors, f"a stored {doc.get('source')} record does not conform to memex.message/1: {errors}"
    return docs


def stored_records(root: Path) -> dict[str, bytes]:
    """Every record and revision of a file store at ``root``, key to bytes."""
    return file_objects(root, "messages/") | file_objects(root, "revisions/")
