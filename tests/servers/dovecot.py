"""A real Dovecot IMAP server on a loopback port, for the IMAP tests and the benchmark.

The server gets its own config, state and mail in a temporary folder and runs
in the foreground (``dovecot -F -c FILE``). As root it runs as ``nobody``
(Dovecot as a whole drops root; the folder is handed to that user). Any user
name logs in with :data:`PASSWORD` (static passdb), and each user has its own
fresh Maildir, so a test isolates itself by picking a new user name.

When Dovecot is not installed the tests are skipped, except when ``$CI`` is
set: then they fail, so CI never silently skips them.
"""

from __future__ import annotations

import contextlib
import grp
import imaplib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

PASSWORD = "secret-for-tests"
DOVECOT_PATHS = ("/usr/sbin/dovecot", "/usr/local/sbin/dovecot")


def dovecot_binary() -> str | None:
    """Where the dovecot binary is, or None."""
    found = shutil.which("dovecot")
    if found:
        return found
    return next((p for p in DOVECOT_PATHS if os.access(p, os.X_OK)), None)


def require_dovecot() -> str:
    """The dovecot binary; skip the test without it, or fail when running in CI."""
    binary = dovecot_binary()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("dovecot is not installed but $CI is set: the IMAP tests must run in CI (apt-get install dovecot-imapd)")
        pytest.skip("dovecot not installed (apt-get install dovecot-imapd)")
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Dovecot:
    """A running server: where it listens and how to talk to it."""

    root: Path
    port: int
    proc: subprocess.Popen[bytes]
    uid: int
    gid: int
    users: list[str] = field(default_factory=list)
    tls_port: int = 0  # implicit-TLS listener (start(tls=True) only)

    host = "127.0.0.1"

    def new_user(self) -> str:
        """A fresh user name (its own empty Maildir)."""
        name = f"u{uuid.uuid4().hex[:10]}"
        self.users.append(name)
        return name

    def maildir(self, user: str) -> Path:
        """The user's Maildir root on disk."""
        return self.root / "home" / user / "Maildir"

    def client(self, user: str, password: str = PASSWORD) -> imaplib.IMAP4:
        """A logged-in IMAP connection as ``user``."""
        conn = imaplib.IMAP4(self.host, self.port, timeout=30)
        conn.login(user, password)
        return conn

    def append(self, user: str, mailbox: str, raw: bytes, flags: str | None = None, date: Any = None) -> None:
        """Deliver one message with IMAP APPEND (creating the mailbox if needed)."""
        with self.session(user) as conn:
            append(conn, mailbox, raw, flags, date)

    def session(self, user: str) -> _Session:
        """A context manager yielding a logged-in connection that logs out at exit."""
        return _Session(self, user)

    def uidvalidity(self, user: str, mailbox: str) -> int:
        """The mailbox's current UIDVALIDITY."""
        with self.session(user) as conn:
            typ, data = conn.status(quote(mailbox), "(UIDVALIDITY)")
            assert typ == "OK"
            text = data[0].decode() if isinstance(data[0], bytes) else str(data[0])
            return int(text.rsplit("UIDVALIDITY", 1)[1].strip(" )"))


class _Session:
    def __init__(self, server: Dovecot, user: str) -> None:
        self.server, self.user = server, user
        self.conn: imaplib.IMAP4 | None = None

    def __enter__(self) -> imaplib.IMAP4:
        self.conn = self.server.client(self.user)
        return self.conn

    def __exit__(self, *exc: object) -> None:
        if self.conn is not None:
            try:
                self.conn.logout()
            except Exception:
                pass


def quote(mailbox: str) -> str:
    """An IMAP quoted string for a mailbox name."""
    return '"' + mailbox.replace("\\", "\\\\").replace('"', '\\"') + '"'


def append(conn: imaplib.IMAP4, mailbox: str, raw: bytes, flags: str | None = None, date: Any = None) -> None:
    """APPEND on an open connection, creating the mailbox on first use."""
    typ, data = conn.append(quote(mailbox), flags, date, raw)
    if typ != "OK" and b"TRYCREATE" in b" ".join(d for d in data if isinstance(d, bytes)):
        conn.create(quote(mailbox))
        typ, data = conn.append(quote(mailbox), flags, date, raw)
    assert typ == "OK", data


CONFIG = """\
protocols = imap
listen = 127.0.0.1
{ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login{mechanisms}
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
mail_uid = {user}
mail_gid = {group}
first_valid_uid = 1
first_valid_gid = 1
mail_location = maildir:~/Maildir
imap_max_line_length = 1M
{oauth2}passdb {{
  driver = static
  args = password={password}
  mechanisms = plain login
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/home/%u
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
{imaps}}}
"""
SSL_ON = """ssl = yes
ssl_cert = <{root}/cert.pem
ssl_key = <{root}/key.pem"""
# Dovecot's oauth2 passdb for XOAUTH2 and OAUTHBEARER (the static one then serves only PLAIN and LOGIN): each token is
# checked by POSTing ``token=...`` to the introspection URL, whose JSON must say ``"active": true`` and name the user.
OAUTH2_PASSDB = """auth_failure_delay = 0
passdb {{
  driver = oauth2
  mechanisms = {mechanisms}
  args = {root}/dovecot-oauth2.conf.ext
}}
"""
OAUTH2_CONF = """introspection_mode = post
introspection_url = {url}
username_attribute = username
active_attribute = active
active_value = true
{scope}"""
IMAPS = """  inet_listener imaps {{
    address = 127.0.0.1
    port = {port}
    ssl = yes
  }}
"""


def self_signed(folder: Path, name: str = "cert") -> Path:
    """A self-signed certificate for 127.0.0.1 and localhost (``{name}.pem``, key ``key.pem``), made with openssl."""
    cert = folder / f"{name}.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(folder / "key.pem"), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert


def _run_as() -> tuple[int, int]:
    """The uid/gid the server runs as: ourselves, or ``nobody`` when we are root."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    nobody = pwd.getpwnam("nobody")
    return nobody.pw_uid, nobody.pw_gid


def start(timeout: float = 30.0, *, tls: bool = False, introspection_url: str | None = None, scope: str | None = None,
          oauth_mechanisms: str = "xoauth2 oauthbearer") -> Dovecot:  # fmt: skip
    """Start a Dovecot on a free loopback port and wait (with a deadline) until it greets.

    With ``tls`` it also offers STARTTLS and listens for implicit TLS on ``tls_port``, with a
    self-signed certificate at ``root/cert.pem``. With ``introspection_url`` it also offers
    ``oauth_mechanisms`` (``AUTH=XOAUTH2`` and ``AUTH=OAUTHBEARER``), checking each token there
    (``scope``: one the token must have); PLAIN and LOGIN keep the static password.
    """
    binary = require_dovecot()
    uid, gid = _run_as()
    root = Path(tempfile.mkdtemp(prefix="memex-dovecot-"))
    os.chmod(root, 0o755)
    for sub in ("run", "state", "home"):
        (root / sub).mkdir()
    port = _free_port()
    tls_port = _free_port() if tls else 0
    if tls:
        self_signed(root)
    if introspection_url is not None:
        (root / "dovecot-oauth2.conf.ext").write_text(
            OAUTH2_CONF.format(url=introspection_url, scope=f"scope = {scope}\n" if scope else "")
        )
    conf = root / "dovecot.conf"
    conf.write_text(
        CONFIG.format(
            root=root, user=pwd.getpwuid(uid).pw_name, group=grp.getgrgid(gid).gr_name, uid=uid, gid=gid, port=port, password=PASSWORD,
            ssl=SSL_ON.format(root=root) if tls else "ssl = no", imaps=IMAPS.format(port=tls_port) if tls else "",
            mechanisms=f" {oauth_mechanisms}" if introspection_url else "",
            oauth2=OAUTH2_PASSDB.format(root=root, mechanisms=oauth_mechanisms) if introspection_url else "",
        )
    )  # fmt: skip
    if os.geteuid() == 0:
        for path in [root, *root.rglob("*")]:
            os.chown(path, uid, gid)
    server = Dovecot(root=root, port=port, proc=_launch(binary, root, uid, gid), uid=uid, gid=gid, tls_port=tls_port)
    _greeted(server, timeout)
    return server


def _launch(binary: str, root: Path, uid: int, gid: int) -> subprocess.Popen[bytes]:
    """Dovecot in the foreground on the config under ``root`` (as ``uid``/``gid`` when we are root)."""
    kwargs: dict[str, Any] = {}
    if os.geteuid() == 0:
        kwargs = {"user": uid, "group": gid, "extra_groups": []}
    with (root / "stderr.log").open("ab") as stderr:
        return subprocess.Popen([binary, "-F", "-c", str(root / "dovecot.conf")], stdout=stderr, stderr=subprocess.STDOUT, cwd=root,
                                start_new_session=True, **kwargs)  # fmt: skip


def restart(server: Dovecot, timeout: float = 30.0) -> None:
    """Stop the server and every process of it (each connection closes at once, as when its machine restarts), and
    start it again on the same port, mail and state."""
    server.proc.terminate()
    server.proc.wait(10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.proc.pid, signal.SIGKILL)  # its imap processes, which may outlive the master for 30 s
    server.proc = _launch(require_dovecot(), server.root, server.uid, server.gid)
    _greeted(server, timeout)


def _greeted(server: Dovecot, timeout: float) -> None:
    """Wait (with a deadline) until the server greets on its port; stop it and fail otherwise."""
    root, port, proc = server.root, server.port, server.proc
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            log = (root / "stderr.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"dovecot exited with status {proc.returncode}: {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.settimeout(2)
                if s.recv(200).startswith(b"* OK"):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop(server)
            raise AssertionError(f"dovecot did not greet on port {port} within {timeout}s")
        time.sleep(0.05)


def stop(server: Dovecot) -> None:
    """Stop the server and remove its folder."""
    server.proc.terminate()
    try:
        server.proc.wait(10)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait(10)
    # Removed by a detached rm: after the 200,000-message test this folder takes tens of seconds to delete, and the
    # session's last test should not wait for it.
    subprocess.Popen(["rm", "-rf", str(server.root)], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(scope="session", name="dovecot")
def dovecot_server() -> Iterator[Dovecot]:
    """A Dovecot server for the whole session (tests isolate themselves with :meth:`Dovecot.new_user`)."""
    server = start()
    try:
        yield server
    finally:
        stop(server)
