"""The lean S3 client: SigV4 against published vectors and botocore, semantics on a real moto server, faults, threads."""

from __future__ import annotations

import hashlib
import http.server
import json
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

import boto3
import pytest

from memex.config import StoreConfig, parse
from memex.errors import ConfigError, StoreError
from memex.s3.lean import LeanS3
from memex.s3.sigv4 import EMPTY_SHA256, Credentials, Endpoint, Signer, encode_key, endpoint_for
from memex.store import open_store
from memex.store.s3 import S3Store
from tests.conftest import FAKE_AWS, FaultProxy, moto_server, put_fault, s3_objects

EXAMPLE = Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
ODD_KEYS = [
    "messages/im/a%2Fb%25c.json",  # our own escapes: '%' must travel as %25
    "messages/im/tilde~and-dash_dot.json",
    "messages/im/with space and+plus=eq&amp.json",
    "messages/im/ünïcödé 名前 😀.json",
    "messages/im/" + "/".join(["long" * 50] * 4) + ".json",  # 800+ characters (S3 allows 1024 bytes; SeaweedFS 255 per segment)
    "messages/im/deep/er/path/x.eml",
    "messages/im/punct!$'()*,;:@[].json",
]


def lean_store(url: str, bucket: str, prefix: str = "p") -> S3Store:
    """An S3Store using the lean client against ``url``, retries without waiting."""
    return S3Store(bucket, prefix, endpoint_url=url, client="lean", retry_base_delay=0.0)


# -- the signer --------------------------------------------------------------------------------------------------------


def test_signer_matches_the_aws_documentation_example() -> None:
    """The S3 SigV4 'GET Object' example of the AWS docs (range header, 2013-05-24, us-east-1) signs to its published value."""
    headers = {"Host": "examplebucket.s3.amazonaws.com", "Range": "bytes=0-9", "x-amz-content-sha256": EMPTY_SHA256,
               "x-amz-date": "20130524T000000Z"}  # fmt: skip
    auth = Signer("us-east-1").authorization("GET", "/test.txt", headers, EXAMPLE, "20130524T000000Z", EMPTY_SHA256)
    assert auth == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def test_signer_matches_the_aws_documentation_put_example() -> None:
    """The docs' 'PUT Object' example (key test$file.text, so '$' is encoded; body hash; storage class) signs to its value."""
    body = b"Welcome to Amazon S3."
    digest = hashlib.sha256(body).hexdigest()
    headers = {"Host": "examplebucket.s3.amazonaws.com", "Date": "Fri, 24 May 2013 00:00:00 GMT",
               "x-amz-date": "20130524T000000Z", "x-amz-storage-class": "REDUCED_REDUNDANCY", "x-amz-content-sha256": digest}  # fmt: skip
    path = "/" + encode_key("test$file.text")
    assert path == "/test%24file.text"
    auth = Signer("us-east-1").authorization("PUT", path, headers, EXAMPLE, "20130524T000000Z", digest)
    assert auth.endswith("Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")


def _botocore_requests(endpoint: str, bucket: str, keys: list[str], token: str | None) -> list[dict[str, Any]]:
    """PUT each key through a real boto3 client to ``endpoint``; capture what botocore signed and sent."""
    seen: list[dict[str, Any]] = []

    def capture(request: Any, **_kw: Any) -> None:
        body = request.body.getvalue() if hasattr(request.body, "getvalue") else bytes(request.body or b"")
        headers = {k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
        seen.append({"url": request.url, "headers": headers, "body": body})

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="s3cr3t/k3y",
                          aws_session_token=token, region_name="us-east-1")  # fmt: skip
    client.meta.events.register("before-send.s3.PutObject", capture)
    for i, key in enumerate(keys):
        client.put_object(Bucket=bucket, Key=key, Body=f"body {i}".encode(), ContentType="application/json", IfNoneMatch="*")
    return seen


def _ours(endpoint: Endpoint, key: str, sent: dict[str, Any], creds: Credentials, encode: Any = encode_key) -> tuple[str, str]:
    """Our path and Authorization for the same key, body, time and (botocore's) signed headers."""
    auth = sent["headers"]["authorization"]
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    ours_set = {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
    headers = {k: v for k, v in sent["headers"].items() if k.lower() in signed and k.lower() not in ours_set}
    body = sent["body"]
    when = datetime.strptime(sent["headers"]["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    path = f"{endpoint.base_path}/{encode(key)}"
    signed_by_us = Signer("us-east-1").sign("PUT", endpoint, path, headers, body, creds, now=when)
    return path, signed_by_us["Authorization"]


@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEXAMPLETOKEN//+=="])
def test_signer_agrees_with_botocore_for_odd_keys(s3_endpoint: str, s3_bucket: str, token: str | None) -> None:
    """For keys with %, ~, spaces, unicode, punctuation and long names, our URL path and Authorization equal botocore's."""
    sent = _botocore_requests(s3_endpoint, s3_bucket, ODD_KEYS, token)
    assert len(sent) == len(ODD_KEYS)
    endpoint = endpoint_for(s3_bucket, "us-east-1", s3_endpoint)
    creds = Credentials("AKIDEXAMPLE", "s3cr3t/k3y", token)
    for key, req in zip(ODD_KEYS, sent, strict=True):
        assert req["headers"]["x-amz-content-sha256"] == hashlib.sha256(req["body"]).hexdigest()  # botocore signed the body too
        path, auth = _ours(endpoint, key, req, creds)
        assert path == urlsplit(req["url"]).path
        assert auth == req["headers"]["authorization"]
        if token:
            assert req["headers"]["x-amz-security-token"] == token


def test_a_signer_that_leaves_percent_unencoded_is_caught(s3_endpoint: str, s3_bucket: str) -> None:
    """The harness above fails a naive encoder that keeps '%' (and so signs another path) for our escaped keys only."""
    keys = ["messages/im/a%2Fb%25c.json", "messages/im/plain.json"]
    sent = _botocore_requests(s3_endpoint, s3_bucket, keys, None)
    endpoint = endpoint_for(s3_bucket, "us-east-1", s3_endpoint)
    creds = Credentials("AKIDEXAMPLE", "s3cr3t/k3y")

    def naive(key: str) -> str:
        return quote(key, safe="/~%")

    _, bad = _ours(endpoint, keys[0], sent[0], creds, encode=naive)
    assert bad != sent[0]["headers"]["authorization"]
    _, same = _ours(endpoint, keys[1], sent[1], creds, encode=naive)
    assert same == sent[1]["headers"]["authorization"]  # no '%': naive and right agree, so only the encoding differs


def test_signing_key_is_cached_per_day_and_secret() -> None:
    """The derived key is reused for the same date and secret, and re-derived when either changes."""
    signer = Signer("eu-west-1")
    k1 = signer.signing_key("secret", "20240101")
    assert signer.signing_key("secret", "20240101") is k1
    assert signer.signing_key("secret", "20240102") != k1
    assert signer.signing_key("other", "20240102") != signer.signing_key("secret", "20240102")


def test_addressing_styles() -> None:
    """Custom endpoint: path style with its port; AWS: virtual-hosted, or path style for bucket names with dots."""
    ep = endpoint_for("b", "us-east-1", "http://127.0.0.1:9000")
    assert (ep.scheme, ep.host, ep.port, ep.host_header, ep.base_path) == ("http", "127.0.0.1", 9000, "127.0.0.1:9000", "/b")
    ep = endpoint_for("my-bucket", "eu-central-1", None)
    assert (ep.scheme, ep.host_header, ep.base_path) == ("https", "my-bucket.s3.eu-central-1.amazonaws.com", "")
    ep = endpoint_for("my.dotted.bucket", "eu-central-1", None)
    assert (ep.host_header, ep.base_path) == ("s3.eu-central-1.amazonaws.com", "/my.dotted.bucket")
    assert endpoint_for("b", "us-east-1", "https://minio.example:443/").host_header == "minio.example"


# -- against moto ------------------------------------------------------------------------------------------------------


def test_create_only_overwrite_get_and_missing(any_s3: tuple[str, str]) -> None:
    """put_new stores once and reports the second as a duplicate (412) keeping the first bytes; put replaces; 404 is None."""
    s3_endpoint, s3_bucket = any_s3  # moto, then SeaweedFS
    store = lean_store(s3_endpoint, s3_bucket)
    assert store.put_new("messages/s/a.json", b"one") is True
    assert store.put_new("messages/s/a.json", b"two") is False
    assert store.get("messages/s/a.json") == b"one"
    store.put("messages/s/a.json", b"three")
    assert store.get("messages/s/a.json") == b"three"
    assert store.get("messages/s/none.json") is None
    head = boto3.client("s3", endpoint_url=s3_endpoint).head_object(Bucket=s3_bucket, Key="p/messages/s/a.json")
    assert head["ContentType"] == "application/json"
    assert isinstance(store.client, LeanS3)


def test_odd_keys_round_trip_exactly(any_s3: tuple[str, str]) -> None:
    """Keys with %, ~, spaces, unicode, punctuation, slashes and 800+ characters land under exactly that name."""
    s3_endpoint, s3_bucket = any_s3  # moto, then SeaweedFS
    store = lean_store(s3_endpoint, s3_bucket, prefix="")
    bodies = {key: f"body {i}".encode() for i, key in enumerate(ODD_KEYS)}
    for key, body in bodies.items():
        assert store.put_new(key, body) is True
    for key, body in bodies.items():
        assert store.put_new(key, b"again") is False
        assert store.get(key) == body
    assert s3_objects(s3_endpoint, s3_bucket) == bodies


def test_a_naive_percent_encoding_stores_under_another_key(s3_endpoint: str, s3_bucket: str) -> None:
    """Sent unencoded, our escape 'a%2Fb' would be decoded by S3 into 'a/b': the round trip above catches that."""
    import http.client

    endpoint = endpoint_for(s3_bucket, "us-east-1", s3_endpoint)
    path = f"{endpoint.base_path}/{quote('x/a%2Fb.json', safe='/~%')}"
    headers = Signer("us-east-1").sign("PUT", endpoint, path, {"content-length": "1"}, b"x", Credentials("testing", "testing"))
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=10)
    conn.request("PUT", path, body=b"x", headers=headers)
    assert conn.getresponse().status == 200
    conn.close()
    assert list(s3_objects(s3_endpoint, s3_bucket)) == ["x/a/b.json"]


def test_eight_threads_share_one_store(s3_endpoint: str, s3_bucket: str) -> None:
    """8 threads x 200 create-only PUTs on one store: all 1,600 stored once with their bytes; a second pass is all duplicates."""
    store = lean_store(s3_endpoint, s3_bucket)
    results: dict[int, list[bool]] = {}
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            results[t] = [store.put_new(f"messages/t{t}/{i}.json", f"{t}:{i}".encode()) for i in range(200)]
            results[t] += [store.put_new(f"messages/t{t}/{i}.json", b"dup") for i in range(0, 200, 10)]
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors and all(not th.is_alive() for th in threads)
    for t in range(8):
        assert results[t] == [True] * 200 + [False] * 20
    stored = s3_objects(s3_endpoint, s3_bucket, "p/messages/")
    assert stored == {f"p/messages/t{t}/{i}.json": f"{t}:{i}".encode() for t in range(8) for i in range(200)}


# -- faults through real proxies ---------------------------------------------------------------------------------------


def test_a_500_then_success_is_retried(s3_endpoint: str, s3_bucket: str, proxy: FaultProxy) -> None:
    """A PUT answered 500 once is sent again and stored; the caller sees success."""
    proxy.rule = put_fault(proxy, lambda n: n == 1)
    store = lean_store(proxy.url, s3_bucket)
    assert store.put_new("messages/s/a.json", b"one") is True
    assert proxy.puts == 2 and len(proxy.faults) == 1
    assert s3_objects(s3_endpoint, s3_bucket) == {"p/messages/s/a.json": b"one"}


def test_persistent_500_raises_store_error_after_five_attempts(s3_bucket: str, proxy: FaultProxy) -> None:
    """Five 500s: a one-line StoreError naming bucket, key and code (not the body); nothing is reported stored."""
    proxy.rule = put_fault(proxy, lambda _n: True)
    store = lean_store(proxy.url, s3_bucket)
    with pytest.raises(StoreError) as err:
        store.put_new("messages/s/a.json", b"one")
    assert proxy.puts == 5
    msg = str(err.value)
    assert msg == f"s3://{s3_bucket}/p/messages/s/a.json: upload refused (InternalError); check the bucket, credentials and endpoint"
    assert "injected" not in msg and "testing" not in msg


def test_dropped_connections_reconnect(s3_bucket: str, proxy: FaultProxy) -> None:
    """A connection the server drops (on a kept-alive one and on a fresh one) is reopened; the PUT is stored once."""
    store = lean_store(proxy.url, s3_bucket)
    assert store.put_new("messages/s/warm.json", b"w") is True  # the thread now holds a kept-alive connection
    drops = {"n": 0}

    def rule(method: str, key: str) -> str | None:
        if method == "PUT" and key.endswith("a.json") and drops["n"] < 2:
            drops["n"] += 1
            return "close"
        return None

    proxy.rule = rule
    assert store.put_new("messages/s/a.json", b"one") is True
    assert drops["n"] == 2
    assert store.get("messages/s/a.json") == b"one"
    proxy.rule = lambda m, k: "close" if m == "PUT" else None
    with pytest.raises(StoreError, match=r"upload failed \(RemoteDisconnected\); check the endpoint and network"):
        store.put_new("messages/s/b.json", b"two")


def test_403_is_not_retried_and_names_credentials(s3_bucket: str, proxy: FaultProxy) -> None:
    """AccessDenied is final: one request, and the error says to check credentials and permissions."""
    proxy.rule = lambda m, _k: "403" if m == "PUT" else None
    store = lean_store(proxy.url, s3_bucket)
    with pytest.raises(StoreError, match=r"upload refused \(AccessDenied\); check the credentials and their permissions"):
        store.put_new("messages/s/a.json", b"one")
    assert len(proxy.faults) == 1


def test_503_is_retried(s3_bucket: str, proxy: FaultProxy) -> None:
    """ServiceUnavailable twice, then through: stored, three requests."""
    seen: list[int] = []

    def rule(method: str, _key: str) -> str | None:
        if method == "PUT":
            seen.append(1)
            return "503" if len(seen) <= 2 else None
        return None

    proxy.rule = rule
    assert lean_store(proxy.url, s3_bucket).put_new("messages/s/a.json", b"one") is True
    assert len(seen) == 3


class _Canned(http.server.BaseHTTPRequestHandler):
    """A loopback server answering every request with one canned S3 response."""

    protocol_version = "HTTP/1.1"
    answer: tuple[int, dict[str, str], bytes] = (200, {}, b"")

    def log_message(self, *_args: Any) -> None:
        pass

    def _any(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, headers, body = self.answer
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = _any


def _canned(answer: tuple[int, dict[str, str], bytes]) -> Iterator[str]:
    handler = type("H", (_Canned,), {"answer": answer})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "answer",
    [
        (400, {}, b"<Error><Code>AuthorizationHeaderMalformed</Code><Region>eu-west-1</Region></Error>"),
        (301, {"x-amz-bucket-region": "eu-west-1"}, b"<Error><Code>PermanentRedirect</Code></Error>"),
    ],
)
def test_wrong_region_is_named(answer: tuple[int, dict[str, str], bytes]) -> None:
    """A region error or redirect says the configured region is wrong and which one S3 reported."""
    for url in _canned(answer):
        store = lean_store(url, "b")
        with pytest.raises(StoreError, match=r"wrong region 'us-east-1', S3 says the bucket is in 'eu-west-1'"):
            store.put_new("messages/s/a.json", b"x")


@pytest.mark.parametrize("status", [201, 204, 302, 404])
def test_unexpected_answers_are_never_success(status: int) -> None:
    """Only 200 means stored and only 412 means duplicate: any other answer to a PUT is an error, not a success."""
    for url in _canned((status, {}, b"")):
        with pytest.raises(StoreError, match=rf"upload refused \({status}\)"):
            lean_store(url, "b").put_new("messages/s/a.json", b"x")


# -- moto with signature verification on -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verifying_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Credentials]]:
    """A separate moto server that verifies SigV4 signatures (IAM auth on); yields URL, bucket and valid credentials."""
    with moto_server(tmp_path_factory.mktemp("moto-auth") / "moto.log") as url:
        iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1")
        iam.create_user(UserName="memex")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        iam.put_user_policy(UserName="memex", PolicyName="s3", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="memex")["AccessKey"]
        bucket = f"auth-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket=bucket)
        req = urllib.request.Request(url + "/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(req, timeout=10):
            pass
        yield url, bucket, Credentials(key["AccessKeyId"], key["SecretAccessKey"])


def test_a_verifying_server_accepts_our_signatures(verifying_s3: tuple[str, str, Credentials]) -> None:
    """moto with IAM auth on recomputes each signature: our PUTs and GETs of odd keys pass, a wrong secret is refused (403)."""
    url, bucket, creds = verifying_s3
    lean = LeanS3(bucket, credentials=lambda: creds, region="us-east-1", endpoint_url=url, retry_base_delay=0.0)
    for i, key in enumerate(ODD_KEYS):
        assert lean.put(key, f"v{i}".encode(), "application/json", create_only=True) is True
        assert lean.put(key, b"again", "application/json", create_only=True) is False
        assert lean.get(key) == f"v{i}".encode()
    lean.put(ODD_KEYS[0], b"new", "application/json", create_only=False)
    assert lean.get(ODD_KEYS[0]) == b"new"
    assert lean.get("missing.json") is None
    bad = Credentials(creds.access_key, "not-the-secret")
    wrong = LeanS3(bucket, credentials=lambda: bad, region="us-east-1", endpoint_url=url, retry_base_delay=0.0)
    with pytest.raises(StoreError, match=r"upload refused \(SignatureDoesNotMatch\); check the credentials") as err:
        wrong.put("x.json", b"x", "application/json", create_only=True)
    assert "not-the-secret" not in str(err.value)


# -- configuration and imports -----------------------------------------------------------------------------------------


def test_client_key_is_validated() -> None:
    """[store] client accepts "lean" and "boto3" and refuses anything else naming the key (exit 2)."""
    assert parse({"store": {"url": "s3://bkt/p"}}, None).store.client == "lean"
    assert parse({"store": {"url": "s3://bkt/p", "client": "boto3"}}, None).store.client == "boto3"
    with pytest.raises(ConfigError, match=r"store\.client") as err:
        parse({"store": {"url": "s3://bkt/p", "client": "fast"}}, None)
    assert err.value.exit_code == 2


def test_boto3_stays_selectable(s3_endpoint: str, s3_bucket: str) -> None:
    """client = "boto3" still works end to end and interoperates with objects the lean client wrote."""
    lean = open_store(StoreConfig(url=f"s3://{s3_bucket}/p", endpoint_url=s3_endpoint, client="lean"))
    boto = open_store(StoreConfig(url=f"s3://{s3_bucket}/p", endpoint_url=s3_endpoint, client="boto3"))
    assert lean.put_new("messages/s/x%25y.json", b"one") is True
    assert boto.put_new("messages/s/x%25y.json", b"two") is False
    assert boto.get("messages/s/x%25y.json") == b"one"
    assert isinstance(getattr(lean, "client", None), LeanS3) and not isinstance(getattr(boto, "client", None), LeanS3)


def test_lean_store_imports_boto3_only_on_the_first_request(s3_endpoint: str, s3_bucket: str) -> None:
    """Opening a lean store imports neither boto3 nor botocore; the first request does (for credentials)."""
    code = (
        "import sys\n"
        "from memex.config import StoreConfig\n"
        "from memex.store import open_store\n"
        f"s = open_store(StoreConfig(url='s3://{s3_bucket}/p', endpoint_url='{s3_endpoint}', client='lean'))\n"
        "print('boto3' in sys.modules, 'botocore' in sys.modules)\n"
        "s.get('messages/none.json')\n"
        "print('boto3' in sys.modules, 'botocore' in sys.modules)\n"
    )
    env = {**FAKE_AWS, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, env=env)
    assert out.stdout.split() == ["False", "False", "True", "True"]


def test_credentials_are_read_per_request(s3_endpoint: str, s3_bucket: str) -> None:
    """Each request asks the credential source again, so rotated (refreshed) credentials are used at once."""
    calls: list[int] = []

    def source() -> Credentials:
        calls.append(1)
        return Credentials("testing", "testing", None if len(calls) % 2 else "tok")

    lean = LeanS3(s3_bucket, credentials=source, region="us-east-1", endpoint_url=s3_endpoint, retry_base_delay=0.0)
    assert lean.put("k.json", b"x", "application/json", create_only=True) is True
    assert lean.get("k.json") == b"x"
    assert len(calls) == 2


# -- the wire (memex.s3.connection) -------------------------------------------------------------------------------------------


def _canned_server(answers: list[bytes]) -> tuple[int, list[bytes], threading.Thread]:
    """A loopback server that reads one request per answer on one connection and writes the canned answers in turn."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    port = int(listener.getsockname()[1])
    requests: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            reader = conn.makefile("rb")
            for answer in answers:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    head += reader.readline()
                length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), 0)
                requests.append(head + reader.read(length))
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return port, requests, thread


def test_the_wire_sends_one_write_and_reads_every_framing_s3_uses() -> None:
    """Content-Length, chunked (an error body), HEAD, 100 Continue skipped, then Connection: close; a short body is IncompleteRead."""
    import http.client

    from memex.s3.connection import Connection

    answers = [
        b'HTTP/1.1 200 OK\r\nETag: "e1"\r\nContent-Length: 2\r\n\r\nok',
        b"HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n<Code>\r\nB;ext=1\r\nAccessDenie\r\n8\r\nd</Code>\r\n0\r\n\r\n",
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 120\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 412 Precondition Failed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    ]
    port, requests, thread = _canned_server(answers)
    conn = Connection.open("http", "127.0.0.1", port, timeout=10)
    first = conn.exchange("PUT", "/b/k", {"host": "x", "content-length": "4"}, b"body")
    assert (first.status, first.headers["etag"], first.body, first.will_close) == (200, '"e1"', b"ok", False)
    assert requests[0] == b"PUT /b/k HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\r\nbody"
    chunked = conn.exchange("GET", "/b/k", {"host": "x"}, b"")
    assert (chunked.status, chunked.body) == (403, b"<Code>AccessDenied</Code>")
    head = conn.exchange("HEAD", "/b/k", {"host": "x"}, b"")
    assert (head.status, head.body) == (404, b"")
    final = conn.exchange("PUT", "/b/k", {"host": "x", "if-match": '"e1"', "content-length": "0"}, b"")
    assert (final.status, final.will_close) == (412, True)
    with pytest.raises(http.client.IncompleteRead):
        conn.exchange("GET", "/b/k", {"host": "x"}, b"")
    with pytest.raises(ValueError):
        conn.exchange("GET", "/b/k", {"host": "x", "if-match": 'a"\r\nx-injected: 1'}, b"")
    conn.close()
    thread.join(10)
    assert not thread.is_alive() and len(requests) == 5
