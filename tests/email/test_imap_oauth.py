"""IMAP with OAuth2 against a real Dovecot doing real SASL (oauth2 passdb, XOAUTH2 and OAUTHBEARER), its tokens
checked by introspection at a stand-in identity provider on loopback (tests/servers/identity.py)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from memex import config as memex_config
from memex.registry import make_poller
from memex.runner import poll
from tests.conftest import ROOT, file_objects, patience, run_cli, write_config
from tests.servers import dovecot as dovecot_mod
from tests.servers.dovecot import Dovecot, dovecot_server
from tests.servers.identity import TENANT, IdentityServer

__all__ = ["dovecot_server"]  # the password-only `dovecot` fixture

MAIL = b"From: Alice <alice@example.com>\r\nTo: bob@example.com\r\nSubject: oauth {n}\r\nMessage-ID: <oauth-{n}@example.com>\r\n\r\nhello {n}\r\n"


def mail(n: int) -> bytes:
    """A small mail numbered ``n``."""
    return MAIL.replace(b"{n}", str(n).encode())


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityServer]:
    """The identity stand-in for this module's tests (each test signs a fresh account in)."""
    with IdentityServer(tmp_path_factory.mktemp("idp"), user="nobody-yet") as server:
        yield server


@pytest.fixture(scope="module")
def oauth_dovecot(idp: IdentityServer) -> Iterator[Dovecot]:
    """A Dovecot offering XOAUTH2 and OAUTHBEARER, checking tokens at the stand-in's introspection endpoint."""
    server = dovecot_mod.start(introspection_url=idp.introspection_url)
    try:
        yield server
    finally:
        dovecot_mod.stop(server)


@pytest.fixture
def account(idp: IdentityServer, oauth_dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh mailbox user, the account the stand-in signs in; HTTP clients trust the stand-in's certificate."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(idp.cert))
    user = oauth_dovecot.new_user()
    idp.reset(user)
    return user


def microsoft(server: Dovecot, idp: IdentityServer, user: str, **more: Any) -> dict[str, Any]:
    """An imap source section signing in with provider = "microsoft" at the stand-in."""
    return {"type": "imap", "host": "127.0.0.1", "port": server.port, "security": "none", "user": user, "auth": "oauth2",
            "provider": "microsoft", "client_id": idp.client_id, "tenant": TENANT, "authority": idp.base, "timeout": 10, **more}  # fmt: skip


def google(server: Dovecot, idp: IdentityServer, user: str, **more: Any) -> dict[str, Any]:
    """An imap source section signing in with provider = "google" at the stand-in."""
    return {"type": "imap", "host": "127.0.0.1", "port": server.port, "security": "none", "user": user, "auth": "oauth2",
            "provider": "google", "client_id": idp.client_id, "client_secret": idp.client_secret, "auth_url": idp.auth_url,
            "token_url": idp.token_url, "timeout": 10, **more}  # fmt: skip


def load(tmp_path: Path, table: dict[str, Any]) -> memex_config.Config:
    """A config with the one source ``mail`` and a file store."""
    return memex_config.load(write_config(tmp_path, {"mail": table}))


def sign_in(cfg: memex_config.Config) -> list[str]:
    """``memex auth mail`` in-process for Microsoft (the device-code flow); what it said."""
    said: list[str] = []
    poller = make_poller(cfg.source("mail"))
    try:
        poller.authenticate(said.append)  # type: ignore[attr-defined]
    finally:
        poller.close()
    return said


def methods(server: Dovecot) -> list[str]:
    """The SASL mechanisms of the logins Dovecot accepted, in order."""
    return re.findall(r"Login: user=<[^>]*>, method=([A-Z0-9-]+)", (server.root / "dovecot.log").read_text())


def refused(idp: IdentityServer) -> int:
    """How many tokens Dovecot's introspection found inactive (since the test's account signed in)."""
    return sum(1 for r in idp.requests("/introspect") if r["answer"] is False)


def cli_env(idp: IdentityServer, cfg: memex_config.Config) -> dict[str, str]:
    """The environment a `memex` subprocess needs to trust the stand-in."""
    return {"REQUESTS_CA_BUNDLE": str(idp.cert), "MEMEX_CONFIG": str(cfg.path)}


def everything_but_logins(cfg: memex_config.Config, *outputs: str) -> str:
    """Every file memex wrote outside the login files (logs, cursors, store, index), plus ``outputs``: for canary scans."""
    texts = list(outputs)
    for root in (cfg.state_dir,):
        for path in root.rglob("*"):
            if path.is_file() and path.parent.name != "auth":
                texts.append(path.read_bytes().decode("utf-8", "replace"))
    auth = cfg.state_dir / "auth"
    texts += [p.read_text() for p in auth.glob("*.signin-needed.json")] if auth.exists() else []
    return "\n".join(texts)


def test_microsoft_sign_in_then_polls_over_oauthbearer(tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str) -> None:
    """`memex auth` runs the device-code flow and keeps the login 0600; a poll then signs in with OAUTHBEARER (preferred
    when advertised), drains the mailbox, and asks the identity provider nothing while the access token is valid."""
    for n in range(3):
        oauth_dovecot.append(account, "INBOX", mail(n))
    cfg = load(tmp_path, microsoft(oauth_dovecot, idp, account))
    proc = run_cli("auth", "mail", env=cli_env(idp, cfg))
    assert proc.returncode == 0, proc.stderr
    assert "https://microsoft.com/devicelogin" in proc.stderr and "GXQ4B7ZPM" in proc.stderr
    assert proc.stdout.strip() == f"mail: signed in as {account}; polls will refresh the login silently"
    cache = cfg.state_dir / "auth" / "mail.msal.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600 and stat.S_IMODE(cache.parent.stat().st_mode) == 0o700
    grants = len(idp.requests("/token"))
    result = poll(cfg, "mail")
    assert (result.status, result.new, result.exit_code) == ("ok", 3, 0), result.error
    assert methods(oauth_dovecot)[-1] == "OAUTHBEARER"
    assert len(idp.requests("/token")) == grants  # the cached access token was used as it was
    assert len(file_objects(cfg.state_dir / "store")) >= 3


def test_xoauth2_where_the_server_offers_only_it(tmp_path: Path, idp: IdentityServer, account: str) -> None:
    """A server advertising AUTH=XOAUTH2 but not OAUTHBEARER is signed in to with XOAUTH2."""
    server = dovecot_mod.start(introspection_url=idp.introspection_url, oauth_mechanisms="xoauth2")
    try:
        user = server.new_user()
        idp.reset(user)
        server.append(user, "INBOX", mail(1))
        cfg = load(tmp_path, microsoft(server, idp, user))
        sign_in(cfg)
        result = poll(cfg, "mail")
        assert (result.status, result.new) == ("ok", 1), result.error
        assert methods(server) == ["PLAIN", "XOAUTH2"]  # the append's password login, then the poll's
    finally:
        dovecot_mod.stop(server)


def test_an_expired_access_token_is_refreshed_without_a_word(
    tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str
) -> None:
    """The server refuses an access token that expired early (the client still held it valid): the poll refreshes it
    once, signs in, stores the new mail, and logs no warning or error."""
    cfg = load(tmp_path, microsoft(oauth_dovecot, idp, account))
    sign_in(cfg)
    assert poll(cfg, "mail").status == "idle"
    oauth_dovecot.append(account, "INBOX", mail(7))
    idp.expire_access()
    result = poll(cfg, "mail")
    assert (result.status, result.new, result.exit_code) == ("ok", 1, 0), result.error
    assert idp.grants("refresh_token") == 1 and refused(idp) == 1
    events = [json.loads(line) for line in (cfg.state_dir / "logs" / "mail.jsonl").read_text().splitlines()]
    assert not [e for e in events if e.get("level") in ("warning", "error")]


def test_a_token_about_to_expire_is_refreshed_before_it_is_used(
    tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str
) -> None:
    """Google's login file: an access token with less than five minutes left is refreshed before the poll connects,
    so the server never sees a stale token (Google's refresh keeps the refresh token)."""
    idp.access_lifetime = 120
    cfg = load(tmp_path, google(oauth_dovecot, idp, account))
    google_sign_in(cfg, idp)
    oauth_dovecot.append(account, "INBOX", mail(3))
    for _ in range(2):
        assert poll(cfg, "mail").exit_code == 0
    assert idp.grants("refresh_token") == 2 and refused(idp) == 0
    login = json.loads((cfg.state_dir / "auth" / "mail.oauth2.json").read_text())
    assert login["refresh_token"] in idp.issued and login["access_token"] == idp.issued[-1]


def test_a_revoked_login_is_one_line_remembered_and_cured_by_signing_in(
    tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str
) -> None:
    """Revoked consent: the poll fails with one line naming `memex auth mail`, exit 1, status AUTH; the next polls fail
    the same way without asking the identity provider again; `memex auth` clears it and the poll works again."""
    cfg = load(tmp_path, microsoft(oauth_dovecot, idp, account))
    sign_in(cfg)
    idp.revoke()
    env = cli_env(idp, cfg)
    first = run_cli("poll", "mail", env=env)
    assert first.returncode == 1
    (line,) = first.stderr.strip().splitlines()
    assert "invalid_grant" in line and "run `memex auth mail` to sign in again" in line and "Traceback" not in line
    asked = len(idp.requests("/token"))
    for _ in range(2):
        again = run_cli("poll", "mail", env=env)
        assert again.returncode == 1 and "remembered since" in again.stderr and "memex auth mail" in again.stderr
    assert len(idp.requests("/token")) == asked  # not retried against the identity provider
    status = run_cli("status", "--json", env=env)
    (row,) = [r for r in json.loads(status.stdout) if r["source"] == "mail"]
    assert row["state"] == "AUTH"
    idp.pending_polls = 0
    assert run_cli("auth", "mail", env=env).returncode == 0
    oauth_dovecot.append(account, "INBOX", mail(9))
    result = poll(cfg, "mail")
    assert (result.status, result.new) == ("ok", 1), result.error
    assert not (cfg.state_dir / "auth" / "mail.signin-needed.json").exists()


def test_signing_in_as_another_account_than_user_says_so(tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str) -> None:
    """The device-code sign-in names an account other than `user`: `memex auth` still keeps the login (a shared
    mailbox is legitimate) but says so, and the poll's refusal then names the mismatch to check."""
    idp.reset(f"{account}@contoso.com")
    cfg = load(tmp_path, microsoft(oauth_dovecot, idp, "someone.else@contoso.com"))
    said = sign_in(cfg)
    assert any(line.startswith(f"note: signed in as {account}@contoso.com but `user` is someone.else@contoso.com") for line in said)
    result = poll(cfg, "mail")
    assert result.auth_required and "check that `user` is the account that signed in" in (result.error or "")


def test_a_wrong_tenant_is_one_line_at_sign_in(tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str) -> None:
    """A tenant the identity platform does not know: `memex auth` fails with one line naming `tenant`, exit 1."""
    cfg = load(tmp_path, microsoft(oauth_dovecot, idp, account, tenant="contoso-typo.onmicrosoft.com"))
    proc = run_cli("auth", "mail", env=cli_env(idp, cfg))
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert "tenant" in line and "Traceback" not in line


def test_a_token_without_the_imap_scope_is_refused_in_one_line(tmp_path: Path, idp: IdentityServer, account: str) -> None:
    """The app registration lacks the IMAP permission (the token carries another scope): a server that requires the
    scope refuses it; the poll says so in one line naming `user` and the permission, and remembers it."""
    server = dovecot_mod.start(introspection_url=idp.introspection_url, scope="https://outlook.office.com/IMAP.AccessAsUser.All")
    try:
        user = server.new_user()
        idp.reset(user)
        cfg = load(tmp_path, microsoft(server, idp, user))
        sign_in(cfg)
        ok = poll(cfg, "mail")
        assert ok.exit_code == 0, ok.error
        idp.scope_override = "https://graph.microsoft.com/Mail.Read"
        idp.expire_access()
        result = poll(cfg, "mail")
        assert result.exit_code == 1 and result.auth_required
        assert "refused the OAuth2 token" in (result.error or "") and "IMAP permission" in (result.error or "")
    finally:
        dovecot_mod.stop(server)


def test_a_server_without_oauth2_is_one_clear_line(tmp_path: Path, idp: IdentityServer, dovecot: Dovecot, account: str) -> None:
    """A server that advertises neither AUTH=OAUTHBEARER nor AUTH=XOAUTH2: one line saying what it offers, exit 1."""
    cfg = load(tmp_path, microsoft(dovecot, idp, account))
    sign_in(cfg)
    proc = run_cli("poll", "mail", env=cli_env(idp, cfg))
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert "does not offer OAuth2 sign-in" in line and "LOGIN PLAIN" in line


# -- Google: the loopback redirect with PKCE (its tests: test_imap_oauth_google.py) -------------------------------
def start_auth(cfg: memex_config.Config, idp: IdentityServer, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`memex auth mail ARGS` running; the authorization address it printed."""
    env = {**os.environ, **cli_env(idp, cfg)}
    proc = subprocess.Popen([sys.executable, "-m", "memex", "auth", "mail", *args], cwd=ROOT, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith(idp.auth_url):
            return proc, line.strip()
    proc.kill()
    raise AssertionError("memex auth printed no authorization address")


def browse(idp: IdentityServer, url: str) -> str:
    """The user approves in a browser: where the consent screen sends the browser."""
    resp = requests.get(url, allow_redirects=False, verify=str(idp.cert), timeout=10)
    assert resp.status_code == 302, resp.text
    return str(resp.headers["Location"])


def google_sign_in(cfg: memex_config.Config, idp: IdentityServer) -> subprocess.CompletedProcess[str]:
    """`memex auth mail` for Google through the loopback redirect, the test acting as the browser."""
    proc, url = start_auth(cfg, idp)
    back = browse(idp, url)
    assert back.startswith("http://127.0.0.1:")
    assert requests.get(back, timeout=10).status_code == 200  # the browser lands on memex's listener
    out, err = proc.communicate(timeout=patience(60))
    assert proc.returncode == 0, err
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_no_token_or_secret_anywhere_but_the_login_files(tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str) -> None:
    """Canary: after sign-in, polls, a silent refresh, a refused token and a revoked login, no token, refresh token,
    authorization code or client secret appears in a log, an error, stderr, a cursor, the index or a stored object."""
    oauth_dovecot.append(account, "INBOX", mail(11))
    cfg = load(tmp_path, google(oauth_dovecot, idp, account))
    outputs = [google_sign_in(cfg, idp).stderr]
    env = cli_env(idp, cfg)
    outputs.append(run_cli("poll", "mail", env=env).stderr)
    idp.expire_access()
    outputs.append(run_cli("poll", "mail", env=env).stderr)
    idp.expire_access()
    idp.access_lifetime = -10  # the refreshed token is dead on arrival: the server refuses a fresh token too
    refused_fresh = run_cli("poll", "mail", env=env)
    assert refused_fresh.returncode == 1 and "refused the OAuth2 token" in refused_fresh.stderr
    outputs.append(refused_fresh.stderr)
    idp.revoke()
    for _ in range(2):
        proc = run_cli("poll", "mail", env=env)
        assert proc.returncode == 1
        outputs.append(proc.stderr)
    text = everything_but_logins(cfg, *outputs)
    assert "hello 11" in text and (cfg.state_dir / "logs" / "mail.jsonl").stat().st_size > 0  # the scan saw the mail and the log
    assert idp.issued and not [t for t in idp.issued if t in text]
    assert idp.client_secret not in text


def test_oauth2_config_mistakes_are_one_line_exit_2(tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str) -> None:
    """A missing provider, a missing client_id, a password beside auth = "oauth2": one line naming the key, exit 2."""
    base = microsoft(oauth_dovecot, idp, account)
    cases = [({k: v for k, v in base.items() if k != "provider"}, "provider"),
             ({k: v for k, v in base.items() if k != "client_id"}, "client_id"),
             ({**base, "password_env": "X"}, "password_env"),
             ({**base, "auth": "kerberos"}, "auth")]  # fmt: skip
    for table, key in cases:
        path = write_config(tmp_path, {"mail": table})
        proc = run_cli("poll", "mail", config=path)
        assert proc.returncode == 2, (key, proc.stderr)
        (line,) = proc.stderr.strip().splitlines()
        assert f"sources.mail.{key}" in line, line
