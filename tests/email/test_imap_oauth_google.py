"""IMAP with OAuth2 against a real Dovecot doing real SASL: Google's installed-app flow (loopback redirect with PKCE,
the pasted address, a declined consent, a revoked refresh token) and ``token_cmd``. The fixtures and helpers are
test_imap_oauth.py's."""

from __future__ import annotations

import re
import stat
import threading
from pathlib import Path

import pytest
import requests

from memex.runner import poll
from tests.conftest import patience, run_cli
from tests.email.test_imap_oauth import account, browse, cli_env, google, google_sign_in, idp, load, mail, oauth_dovecot, start_auth
from tests.servers.dovecot import Dovecot
from tests.servers.identity import IdentityServer

__all__ = ["account", "idp", "oauth_dovecot"]  # the fixtures


def test_google_loopback_sign_in_with_pkce_then_poll(tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str) -> None:
    """The installed-app flow: the address carries an S256 challenge, the browser comes back to 127.0.0.1, the code
    is redeemed with its verifier; the login is kept 0600 and the poll signs in with it."""
    oauth_dovecot.append(account, "INBOX", mail(1))
    cfg = load(tmp_path, google(oauth_dovecot, idp, account))
    done = google_sign_in(cfg, idp)
    assert done.stdout.strip() == f"mail: signed in as {account}; polls will refresh the login silently"
    (authorize,) = idp.requests("/o/oauth2/v2/auth")
    assert authorize["query"]["code_challenge_method"] == "S256" and authorize["query"]["scope"] == "https://mail.google.com/"
    assert authorize["query"]["access_type"] == "offline"
    (redeem,) = [r for r in idp.requests("/token") if r["form"]["grant_type"] == "authorization_code"]
    assert len(redeem["form"]["code_verifier"]) >= 43
    login = cfg.state_dir / "auth" / "mail.oauth2.json"
    assert stat.S_IMODE(login.stat().st_mode) == 0o600
    result = poll(cfg, "mail")
    assert (result.status, result.new) == ("ok", 1), result.error


def test_google_sign_in_without_a_browser_by_pasting_the_address(
    tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str
) -> None:
    """`memex auth --no-browser`: nothing listens; the user pastes the address the browser failed to load."""
    cfg = load(tmp_path, google(oauth_dovecot, idp, account))
    proc, url = start_auth(cfg, idp, "--no-browser")
    back = browse(idp, url)
    with pytest.raises(requests.ConnectionError):
        requests.get(back, timeout=5)  # on this machine nothing answers there: the browser shows an error page
    _, err = proc.communicate(back + "\n", timeout=patience(60))
    assert proc.returncode == 0, err
    assert poll(cfg, "mail").exit_code == 0


def test_google_consent_declined_or_a_foreign_address_is_one_line(
    tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str
) -> None:
    """Declined consent (error=access_denied) and an address from another sign-in (its state differs) each end
    `memex auth` with one line, exit 1, and keep no login."""
    cfg = load(tmp_path, google(oauth_dovecot, idp, account))
    idp.deny = True
    proc, url = start_auth(cfg, idp, "--no-browser")
    _, err = proc.communicate(browse(idp, url) + "\n", timeout=patience(60))
    assert proc.returncode == 1 and "sign-in was refused (access_denied)" in err
    idp.deny = False
    proc, url = start_auth(cfg, idp, "--no-browser")
    back = re.sub(r"state=[^&]+", "state=forged", browse(idp, url))
    _, err = proc.communicate(back + "\n", timeout=patience(60))
    assert proc.returncode == 1 and "its state differs" in err
    assert not (cfg.state_dir / "auth" / "mail.oauth2.json").exists()


def test_google_revoked_refresh_token_is_remembered(tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str) -> None:
    """Google answers invalid_grant "Token has been expired or revoked.": one line, then no more refresh attempts."""
    cfg = load(tmp_path, google(oauth_dovecot, idp, account))
    google_sign_in(cfg, idp)
    idp.revoke()
    first = poll(cfg, "mail")
    assert first.auth_required and "invalid_grant" in (first.error or "") and "memex auth mail" in (first.error or "")
    refreshes = idp.grants("refresh_token")
    second = poll(cfg, "mail")
    assert second.auth_required and idp.grants("refresh_token") == refreshes


# -- token_cmd ---------------------------------------------------------------------------------------------------
def test_token_cmd_signs_in_and_its_failures_are_one_line(
    tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str
) -> None:
    """provider = "command": the printed token signs in; a failing helper is named by its exit status only."""
    token = idp.issue("https://mail.google.com/", idp.client_id, refresh=False)["access_token"]
    oauth_dovecot.append(account, "INBOX", mail(5))
    table = {"type": "imap", "host": "127.0.0.1", "port": oauth_dovecot.port, "security": "none", "user": account,
             "auth": "oauth2", "provider": "command", "token_cmd": f"printf '%s\\n' {token}"}  # fmt: skip
    cfg = load(tmp_path, table)
    result = poll(cfg, "mail")
    assert (result.status, result.new) == ("ok", 1), result.error
    cfg = load(tmp_path, {**table, "token_cmd": f"echo {token} >&2; exit 3"})
    proc = run_cli("poll", "mail", env=cli_env(idp, cfg))
    assert proc.returncode == 1 and "token_cmd failed with exit status 3" in proc.stderr and token not in proc.stderr
    assert run_cli("auth", "mail", env=cli_env(idp, cfg)).returncode == 2


def test_a_refresh_that_hangs_never_outlasts_the_poll(tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str) -> None:
    """An identity provider that never answers the refresh: `memex poll --max-seconds 2` still ends within seconds
    (the refresh runs under the poll's deadline), the login untouched and nothing remembered as refused."""
    idp.access_lifetime = 120  # every poll refreshes first
    cfg = load(tmp_path, google(oauth_dovecot, idp, account, timeout=60))
    google_sign_in(cfg, idp)
    login = (cfg.state_dir / "auth" / "mail.oauth2.json").read_text()
    idp.hang = threading.Event()
    proc = run_cli("poll", "mail", "--max-seconds", "2", env=cli_env(idp, cfg), timeout=patience(30))
    assert proc.returncode != 0 and "refreshing the OAuth2 login" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert (cfg.state_dir / "auth" / "mail.oauth2.json").read_text() == login
    assert not (cfg.state_dir / "auth" / "mail.signin-needed.json").exists()
