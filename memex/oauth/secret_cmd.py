"""Secrets from commands the user already has: ``password_cmd``, and ``token_cmd`` (mutt's ``mutt_oauth2.py``, oama,
pizauth print an access token).

The command runs through the shell with no input, within a deadline; its stdout, stripped, is the secret.
memex keeps nothing: a token helper holds the login and refreshes it. A failure is reported by its exit status
only (never its output, which may hold the secret or the helper's own).
"""

from __future__ import annotations

import os
import subprocess

from memex.errors import SourceError

TOKEN_CMD_TIMEOUT = 30.0


def run_secret_cmd(source: str, key: str, command: str, timeout: float, what: str) -> str:
    """What ``command`` (the config's ``key``) prints, stripped; SourceError (one line, no output quoted) when it
    fails, hangs or prints nothing (``what``: "the password", "the access token")."""
    try:
        done = subprocess.run(command, shell=True, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SourceError(f"source {source!r}: {key} did not finish within {timeout:g}s") from None
    except OSError as exc:
        raise SourceError(f"source {source!r}: {key} could not be started ({type(exc).__name__})") from None
    if done.returncode != 0:
        raise SourceError(
            f"source {source!r}: {key} failed with exit status {done.returncode}; run it by hand to see why (its output is not shown here)"
        )
    secret = done.stdout.decode("utf-8", "replace").strip()
    if not secret:
        raise SourceError(f"source {source!r}: {key} printed nothing; it must print {what} on stdout")
    return secret


def run_token_cmd(source: str, command: str, timeout: float = TOKEN_CMD_TIMEOUT) -> str:
    """The access token ``token_cmd`` prints (one word)."""
    token = run_secret_cmd(source, "token_cmd", command, timeout, "the access token")
    if any(c.isspace() for c in token):
        raise SourceError(f"source {source!r}: token_cmd printed more than one word; it must print only the access token on stdout")
    return token


def password(source: str, env_name: str | None, command: str | None, timeout: float) -> str:
    """The password from the environment variable ``env_name`` (``password_env``) or else ``command`` (``password_cmd``)."""
    if env_name is not None:
        value = os.environ.get(env_name)
        if not value:
            raise SourceError(f"source {source!r}: environment variable {env_name} (password_env) is not set or empty")
        return value
    assert command is not None
    return run_secret_cmd(source, "password_cmd", command, timeout, "the password")
