"""``memex serve`` over plain HTTP: the guard (Host, methods, token, headers, no CORS), attachments served safely, the
sanitiser, the command line, and every route with hostile parameters leaving every byte of the archive as it was.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from memex import config as memex_config
from tests.conftest import ROOT, free_port, patience, run_cli, wait_until, write_config
from tests.web.archive import HOSTILE_HTML
from tests.web.conftest import Served

pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")

HOSTILE_KEY = quote("messages/md/hostile-web%40example.com.json", safe="")


def get(served: Served, path: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request to ``served``: status, headers (lower-case names), body."""
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=patience(30))
    try:
        conn.request(method, path, headers={"Host": f"127.0.0.1:{served.port}", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _secure(headers: dict[str, str]) -> None:
    csp = headers["content-security-policy"]
    for part in ("default-src 'none'", "object-src 'none'", "base-uri 'none'"):
        assert part in csp, csp
    assert "frame-ancestors 'none'" in csp or "frame-ancestors 'self'" in csp
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"
    assert not any(k.startswith("access-control-") for k in headers) and "server" not in headers


def test_every_response_carries_the_security_headers_and_no_cors(served: Served) -> None:
    """Pages, static files, the mail frame, attachments, errors (400, 404, 405, 421): each has the CSP, nosniff and
    no-referrer, none a CORS header, even when asked from another origin; pages may not be framed."""
    photos = next(c.key for c in served.archive.conversations(limit=100) if c.title == "Photos with Anna")
    for path in ("/", f"/conversation/{photos}", "/search?q=lease", "/static/app.css", "/static/app.js", f"/mail/{HOSTILE_KEY}",
                 f"/attachment/0/{HOSTILE_KEY}", "/nowhere", "/search?q=%28", "/people?offset=-1"):  # fmt: skip
        status, headers, _ = get(served, path, headers={"Origin": "http://evil.example"})
        assert status in (200, 400, 404), (path, status)
        _secure(headers)
    _, headers, _ = get(served, "/")
    assert "frame-ancestors 'none'" in headers["content-security-policy"] and "script-src 'self'" in headers["content-security-policy"]


def test_a_foreign_host_and_a_writing_method_are_refused(served: Served) -> None:
    """A Host the server is not bound to (DNS rebinding) is 421 with no data; POST, PUT, DELETE, OPTIONS (a CORS
    preflight) are 405: the server only reads."""
    for host in ("evil.example", f"evil.example:{served.port}", "127.0.0.1.evil.example", ""):
        status, headers, body = get(served, "/search?q=lease", headers={"Host": host})
        assert status == 421 and b"lease" not in body, host
        _secure(headers)
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        status, headers, _ = get(
            served, "/", method=method, headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}
        )
        assert status == 405, method
        _secure(headers)
    assert get(served, "/", headers={"Host": f"localhost:{served.port}"})[0] == 200


def test_off_loopback_every_request_needs_the_token(web_cfg: Path) -> None:
    """With the token: no request without it (401); ``Authorization: Bearer`` works; ``/?token=`` sets an HttpOnly,
    SameSite=Strict cookie and drops the token from the address; a wrong token is refused; the token file is 0600 and
    the same token is read back next time (made once)."""
    s = Served(web_cfg, token=True)
    try:
        assert s.token
        assert get(s, "/")[0] == 401
        assert get(s, "/static/app.css")[0] == 401
        assert get(s, "/", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert get(s, "/", headers={"Authorization": f"Bearer {s.token}"})[0] == 200
        status, headers, _ = get(s, f"/search?token={s.token}")
        assert status == 303 and headers["location"] == "/search"
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert get(s, "/", headers={"Cookie": cookie.split(";", 1)[0]})[0] == 200
        assert get(s, "/?token=nope")[0] == 401
        path = s.cfg.state_dir / "web-token"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        from memex.web.security import load_or_make_token

        assert load_or_make_token(s.cfg.state_dir) == (s.token, False)
    finally:
        s.stop()


def test_attachments_a_browser_could_run_are_downloads_and_names_are_safe(served: Served) -> None:
    """HTML, SVG and PDF attachments come as ``application/octet-stream`` downloads under a sandboxing CSP; a PNG
    inline as itself; a name with a bidi override, quotes, a newline and a path is made safe for the header."""
    from memex.web.present import content_disposition

    listed = {a.name: a.index for a in served.archive.message(unquote(HOSTILE_KEY)).attachments}
    for name in ("page.html", "drawing.svg", "invoice.pdf"):
        index = listed[name]
        status, headers, body = get(served, f"/attachment/{index}/{HOSTILE_KEY}")
        assert status == 200 and headers["content-type"] == "application/octet-stream", name
        assert (
            headers["content-disposition"].startswith(f'attachment; filename="{name}"') and "sandbox" in headers["content-security-policy"]
        )
    status, headers, body = get(served, f"/attachment/{listed['photo.png']}/{HOSTILE_KEY}")
    assert status == 200 and headers["content-type"] == "image/png" and body.startswith(b"\x89PNG")
    assert headers["content-disposition"].startswith("inline;")
    status, headers, _ = get(served, f"/attachment/{listed['photo.png']}/{HOSTILE_KEY}?download=1")
    assert headers["content-disposition"].startswith("attachment;") and headers["content-type"] == "application/octet-stream"
    header = content_disposition('../../etc/re"port\u202efdp.exe\r\nX-Evil: 1', inline=False)
    assert "\r" not in header and "\n" not in header and "\u202e" not in header and "/" not in header.split("filename*=")[0]
    assert header.startswith('attachment; filename="_.._etc_re_port_fdp.exe__X-Evil_ 1"')
    assert "%E2%80%AE" not in header  # the override is gone from the UTF-8 name too


def test_the_sanitiser_keeps_text_and_drops_everything_active() -> None:
    """nh3 with memex's allow-list: no script, style, event handler, frame, form, ``javascript:`` or ``data:`` link;
    without remote content no remote image or style URL (not even requested); with it, images come back; controls
    shown."""
    from memex.web.mail import sanitise

    clean = sanitise(HOSTILE_HTML)
    for bad in (
        "<script",
        "<style",
        "onload",
        "onclick",
        "<iframe",
        "<form",
        "<object",
        "<svg",
        "javascript:",
        "data:",
        "evil.example",
        "\u202e",
        "\x1b",
    ):
        assert bad not in clean, bad
    assert "pay now" in clean and "\\u202e" in clean and 'target="_blank"' in clean and "noreferrer" in clean
    remote = sanitise(HOSTILE_HTML, remote=True)
    assert 'src="http://evil.example/pixel.gif"' in remote and "<script" not in remote


ROUTES = [
    "/?source=md'; DROP TABLE messages; --", "/?person=%27%20OR%201%3D1", "/?before=1;DELETE", "/?before=-99999999999999999999",
    "/conversation/1;DROP%20TABLE%20messages", "/conversation/-1?before=abc", "/conversation/1?after=99999999999999999999",
    "/conversation/..%2F..%2Fstate%2Fcursors.json", "/conversation/x?around=..%2F..%2Fetc%2Fpasswd",
    "/message/..%2F..%2Fstate%2Fcursors.json", "/message/messages%2Fmd%2F..%2F..%2F..%2Fetc%2Fpasswd.json", "/message/x'%20OR%20'1'='1",
    "/mail/..%2F..%2Fstate%2Fcursors.json", "/mail/messages%2F..%2Fconfig.json", "/attachment/-1/" + HOSTILE_KEY,
    "/attachment/99999999999999999999/" + HOSTILE_KEY, "/attachment/0/..%2F..%2Fstate%2Fcursors.json", "/attachment/x/y",
    "/search?q=%27%3B%20DROP%20TABLE%20messages%3B%20--", "/search?q=%22%20OR%201%3D1%20--&offset=-5", "/search?q=(((",
    "/search?q=" + "a" * 5000, "/search?q=lease&order=DESC;DROP", "/search?q=lease&offset=99999999999999",
    "/search/results?q=before:2025-13-45", "/search/results?q=with:%22x%27%3B%20--%22", "/people?q=%27;DROP%20TABLE%20handles",
    "/people?offset=-3", "/person/..%2F..%2Fpeople.toml", "/person/%27%3B%20DROP%20TABLE%20handles%3B%20--",
    "/timeline?day=2025-02-30", "/timeline?day=9999-12-31&span=week", "/timeline?span=year", "/sources?part=../../x",
    "/static/..%2F..%2F..%2Fconfig.toml", "/static/../views.py", "/poll", "/poll?source=md", "/index/rebuild",
]  # fmt: skip


def _snapshot(*roots: Path) -> dict[str, tuple[int, str]]:
    """Every file below ``roots``: size and SHA-256 (SQLite's ``-shm`` and an empty ``-wal`` left out: a read-only
    connection may leave them, and they hold no data)."""
    out = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                body = path.read_bytes()
                if path.name.endswith("-shm") or (path.name.endswith("-wal") and not body):
                    continue
                out[str(path)] = (len(body), hashlib.sha256(body).hexdigest())
    return out


def test_no_route_with_hostile_parameters_changes_a_byte(served: Served, web_cfg: Path) -> None:
    """Every route called with hostile parameters (SQL fragments, traversing keys, huge and negative numbers, bad
    dates, unknown values) and with writing methods: each answers a page or a one-line error (never 500, never a
    traceback), and every file of the state folder and the store is byte-identical after."""
    roots = (served.cfg.state_dir, web_cfg.parent / "store", web_cfg.parent / "Maildir")
    before = _snapshot(*roots)
    assert any(p.endswith("index.sqlite") for p in before) and any("/store/messages/" in p for p in before)
    for path in ROUTES:
        for method in ("GET", "POST", "DELETE"):
            status, _, body = get(served, path.replace(" ", "%20"), method=method)
            assert status in ((200, 400, 404) if method == "GET" else (405,)), (method, path, status)
            assert b"Traceback" not in body
    assert get(served, "/search?q=lease")[0] == 200
    assert _snapshot(*roots) == before


def test_memex_serve_starts_and_answers_and_refuses_an_open_address_without_the_token(web_cfg: Path, tmp_path: Path) -> None:
    """``memex serve`` as a command: it says where it listens and answers there, and opens the read socket, through
    which ``memex search`` answers the same bytes as in-process after it stops (the socket then removed);
    ``--host 0.0.0.0`` without ``--token`` is one line naming --token, exit 2, and nothing listens."""
    refused = run_cli("serve", "--host", "0.0.0.0", "--port", str(free_port()), config=web_cfg)
    assert refused.returncode == 2 and refused.stdout == "" and "--token" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    log = tmp_path / "serve.out"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(web_cfg), "serve", "--port", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, cwd=ROOT, env=env)  # fmt: skip
    try:
        wait_until(lambda: "memex serve: http://127.0.0.1:" in log.read_text(), patience(60), "memex serve's first line")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=patience(30))
        conn.request("GET", "/search?q=lease")
        resp = conn.getresponse()
        assert resp.status == 200 and b"lease" in resp.read()
        conn.close()
        sock = memex_config.load(web_cfg).state_dir / "read" / "read.sock"
        assert sock.is_socket()
        through = run_cli("search", "--json", "lease", config=web_cfg)
    finally:
        proc.terminate()
        proc.wait(patience(30))
    assert "Traceback" not in log.read_text()
    assert not sock.exists()
    alone = run_cli("search", "--json", "lease", config=web_cfg)
    assert through.returncode == alone.returncode == 0 and through.stdout == alone.stdout and "lease" in alone.stdout


def test_an_address_memex_serve_cannot_listen_on_is_one_line_of_its_own_and_port_0_says_the_port(web_cfg: Path, tmp_path: Path) -> None:
    """A port another program listens on: one memex line naming it and --port, exit 1 (uvicorn's own was a log line
    and exit 3); a host name no address has (with --token): one line naming --host, exit 2; ``--port 0``: the first
    line names the port the system chose, and the server answers there."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        busy = run_cli("serve", "--port", str(taken.getsockname()[1]), config=web_cfg)
    finally:
        taken.close()
    assert busy.returncode == 1 and busy.stdout == "" and len(busy.stderr.strip().splitlines()) == 1, busy.stderr
    assert "in use" in busy.stderr and "--port" in busy.stderr and "ERROR" not in busy.stderr
    nowhere = run_cli("serve", "--host", "nosuch.invalid", "--token", config=web_cfg)
    assert nowhere.returncode == 2 and len(nowhere.stderr.strip().splitlines()) == 1 and "--host" in nowhere.stderr
    log = tmp_path / "serve.out"
    env = {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(web_cfg), "serve", "--port", "0"], stdout=out,
                                stderr=subprocess.STDOUT, cwd=ROOT, env=env)  # fmt: skip
    try:
        wait_until(lambda: "memex serve: http://127.0.0.1:" in log.read_text(), patience(60), "memex serve's first line")
        port = int(log.read_text().split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
        assert port != 0
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=patience(30))
        conn.request("GET", "/sources")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.terminate()
        proc.wait(patience(30))


def test_without_the_web_extra_memex_serve_says_how_to_install_it(tmp_path: Path) -> None:
    """With the web libraries absent, ``memex serve`` is one line naming ``pip install 'memex[web]'``, exit 2."""
    code = "import sys; sys.modules['starlette'] = None; from memex.cli.entry import main; sys.argv = ['memex', 'serve']; main()"
    cfg = write_config(tmp_path, {})
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=patience(60),
                         env={**os.environ, "MEMEX_CONFIG": str(cfg)})  # fmt: skip
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and "pip install 'memex[web]'" in out.stderr


FORBIDDEN = ("memex.runner", "memex.uploader", "memex.backfill", "memex.search.build", "memex.search.bulk", "memex.search.index",
             "memex.state.cursors", "memex.state.s3state", "memex.verify", "memex.cli.poll", "memex.watch", "memex.oauth", "pollers")  # fmt: skip
DRIVE = """
import asyncio, json, sys
from urllib.parse import unquote
from memex.config import load
from memex.web.run import build
app, archive, _, _ = build(load(sys.argv[1]), host="127.0.0.1", use_token=False)
async def get(path):
    sent = []
    async def receive(): return {"type": "http.request", "body": b"", "more_body": False}
    async def send(m): sent.append(m)
    p, _, q = path.partition("?")
    await app({"type": "http", "method": "GET", "path": unquote(p), "raw_path": p.encode(), "query_string": q.encode(), "root_path": "",
               "headers": [(b"host", b"127.0.0.1:8765")], "scheme": "http", "server": ("127.0.0.1", 8765), "http_version": "1.1"},
              receive, send)
    return sent[0]["status"]
statuses = [asyncio.run(get(p)) for p in json.loads(sys.argv[2])]
print(json.dumps([statuses, sorted(sys.modules)]))
"""


def test_the_server_imports_nothing_that_writes(web_cfg: Path) -> None:
    """Building the application and answering every page loads none of what polls, backfills, moves cursors,
    verifies or writes the index: no route can reach it. (The sources page is left out: it reads the status as
    ``memex status`` does, which loads each source's type to describe its cursor; the hostile-parameter test shows it
    changes nothing.)"""
    paths = ["/", "/search?q=lease", "/search/results?q=lea", "/people", "/person/anna-berg", "/timeline",
             f"/message/{HOSTILE_KEY}", f"/mail/{HOSTILE_KEY}", f"/attachment/0/{HOSTILE_KEY}"]  # fmt: skip
    out = subprocess.run([sys.executable, "-c", DRIVE, str(web_cfg), json.dumps(paths)], capture_output=True, text=True, cwd=ROOT,
                         timeout=patience(60))  # fmt: skip
    assert out.returncode == 0, out.stderr
    statuses, modules = json.loads(out.stdout)
    assert statuses == [200] * len(paths) and "memex.web.views" in modules
    reached = [m for m in modules if m.startswith(FORBIDDEN)]
    assert not reached, reached


def test_a_bug_in_a_page_is_a_500_page_of_one_line_never_a_traceback(web_cfg: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A page whose read fails on an unexpected error answers 500 with one line naming the exception's type (never
    its text, which may quote a message), the headers still on, the server still serving; the log has no traceback."""
    s = Served(web_cfg)
    try:
        secret = "text of a message"

        def broken() -> None:
            raise RuntimeError(secret)

        s.archive.sources = broken
        status, headers, body = get(s, "/sources")
        assert status == 500 and b"RuntimeError" in body and secret.encode() not in body
        _secure(headers)
        assert get(s, "/")[0] == 200
    finally:
        s.stop()
    err = capfd.readouterr().err
    assert "Traceback" not in err and secret not in err
