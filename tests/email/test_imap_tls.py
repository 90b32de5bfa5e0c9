"""IMAP over TLS against a real Dovecot with a self-signed certificate: ssl and starttls, ca_file, a refused certificate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from memex.errors import ConfigError
from memex.registry import make_poller
from memex.runner import poll
from tests.conftest import run_cli, write_config
from tests.email.test_imap import PASSWORD_ENV, mail, records
from tests.servers.dovecot import PASSWORD, Dovecot, self_signed, start, stop


@pytest.fixture(scope="module")
def tls_dovecot() -> Iterator[Dovecot]:
    """A Dovecot offering STARTTLS on ``port`` and implicit TLS on ``tls_port``, with a self-signed certificate."""
    server = start(tls=True)
    try:
        yield server
    finally:
        stop(server)


def table(server: Dovecot, user: str, security: str, **more: Any) -> dict[str, Any]:
    """A TLS imap source section (the password from the environment)."""
    port = server.tls_port if security == "ssl" else server.port
    return {"type": "imap", "host": "127.0.0.1", "port": port, "security": security, "user": user,
            "password_env": PASSWORD_ENV, **more}  # fmt: skip


@pytest.mark.parametrize("security", ["ssl", "starttls"])
def test_tls_with_the_servers_ca_file_polls(tmp_path: Path, tls_dovecot: Dovecot, security: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ca_file naming the server's self-signed certificate, ssl and starttls both poll and store the mail."""
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    user = tls_dovecot.new_user()
    tls_dovecot.append(user, "INBOX", mail(1))
    cfg = memex_config.load(
        write_config(tmp_path, {"mail": table(tls_dovecot, user, security, ca_file=str(tls_dovecot.root / "cert.pem"))})
    )
    result = poll(cfg, "mail")
    assert (result.status, result.new, result.error) == ("ok", 1, None)
    assert sorted(records(cfg)) == ["m1@example.com"]


@pytest.mark.parametrize("security", ["ssl", "starttls"])
def test_a_certificate_not_trusted_is_refused_with_a_clear_error(tmp_path: Path, tls_dovecot: Dovecot, security: str) -> None:
    """No ca_file (system CAs) or another CA's certificate: the connection is refused, one line says why, exit 1."""
    user = tls_dovecot.new_user()
    tls_dovecot.append(user, "INBOX", mail(1))
    other = tmp_path / "other"
    other.mkdir()
    wrong = self_signed(other, "wrong")
    for extra in ({}, {"ca_file": str(wrong)}):
        path = write_config(tmp_path, {"mail": table(tls_dovecot, user, security, **extra)})
        done = run_cli("poll", "mail", config=path, env={PASSWORD_ENV: PASSWORD})
        assert done.returncode == 1, done.stderr[-800:]
        assert "the TLS certificate of 127.0.0.1" in done.stderr and "set ca_file" in done.stderr, done.stderr[-800:]
        assert "Traceback" not in done.stderr and PASSWORD not in done.stderr
        assert records(memex_config.load(path)) == {}


def test_ca_file_mistakes_name_the_key(tmp_path: Path) -> None:
    """A missing ca_file, or one with security = "none", is a config error naming ca_file."""
    base = {"type": "imap", "host": "127.0.0.1", "user": "u", "password_env": "X"}
    for more, words in (({"ca_file": str(tmp_path / "nope.pem")}, "no such file"), ({"security": "none", "ca_file": "x"}, "is for TLS")):
        path = write_config(tmp_path, {"mail": {**base, **more}})
        with pytest.raises(ConfigError, match=words) as caught:
            make_poller(memex_config.load(path).sources["mail"])
        assert "ca_file" in str(caught.value)


def test_ssl_against_the_plaintext_port_says_to_use_starttls_or_port_993(tmp_path: Path, tls_dovecot: Dovecot) -> None:
    """`security = "ssl"` at Dovecot's plain IMAP port: one line saying the server answered in plain text and what to
    set (port 993, or security = "starttls"), exit 1; never a bare WRONG_VERSION_NUMBER."""
    user = tls_dovecot.new_user()
    section = {**table(tls_dovecot, user, "ssl"), "port": tls_dovecot.port}
    out = run_cli("poll", "mail", config=write_config(tmp_path, {"mail": section}), env={PASSWORD_ENV: PASSWORD})
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    error = json.loads(out.stderr)["error"]
    assert "answered in plain text, not TLS" in error and 'security = "starttls"' in error and "port = 993" in error
    assert "WRONG_VERSION_NUMBER" not in error
