"""Shared fixtures: a real S3 endpoint (moto server mode, over HTTP), configs, and the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
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


def wait_until(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    """Call ``predicate`` until it returns a truthy value or ``timeout`` passes (then fail naming ``what``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server in its own process on a loopback port; yields its URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
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
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


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


class FaultProxy:
    """A real HTTP proxy in front of the S3 server that answers 500 to the PUTs a rule picks.

    Faults are injected at the network boundary, so memex's own I/O runs unpatched.
    """

    def __init__(self, upstream: str, fail_put: Any) -> None:
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlsplit

        self.fail_put = fail_put
        self.puts = 0
        self.failed: list[str] = []
        up = urlsplit(upstream)
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.command == "PUT":
                    with lock:
                        proxy.puts += 1
                        fail = proxy.fail_put(self.path, proxy.puts)
                        if fail:
                            proxy.failed.append(self.path)
                    if fail:
                        msg = b"<Error><Code>InternalError</Code><Message>injected</Message></Error>"
                        self.send_response(500)
                        self.send_header("Content-Length", str(len(msg)))
                        self.end_headers()
                        self.wfile.write(msg)
                        return
                conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
