"""Secrets from commands the user already has: ``password_cmd``, and ``token_cmd`` (mutt's ``mutt_oauth2.py``, oama,
pizauth print an access token).

The command runs through the shell with no input, within a deadline; its stdout, stripped, is the secret. At most
:data:`SECRET_MAX` bytes of it are read: a command that prints more (a helper printing a file, a loop) is stopped and
named, never sent to a server; an access token has the shape RFC 6750 gives a bearer token. memex keeps nothing: a token helper holds the login and refreshes it. A failure is reported by its exit status
only (never its output, which may hold the secret or the helper's own).
"""

from __future__ import annotations

import os
import re
import subprocess

from memex.errors import SourceError

TOKEN_CMD_TIMEOUT = 30.0
SECRET_MAX = 64 * 1024  # bytes: a Microsoft access token with many claims is a few KiB; a password far less
_BEARER = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750's b64token


def _read_bounded(command: str, timeout: float, limit: int) -> tuple[int, bytes] | None:
    """Run ``command`` and read its stdout until it ends, ``limit`` bytes are passed or ``timeout`` runs out: (exit
    status, output), or None when it printed more than ``limit``. The command's process group is killed on an early
    stop, so a helper the shell started cannot keep the pipe open. :class:`subprocess.TimeoutExpired` on the timeout."""
    import selectors
    import signal
    import time

    end = time.monotonic() + timeout
    proc = subprocess.Popen(command, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    out = bytearray()
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(command, timeout)
                if not sel.select(left):
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
                if len(out) > limit:
                    return None
        return proc.wait(max(0.0, end - time.monotonic())), bytes(out)
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
        proc.stdout.close()


def run_secret_cmd(source: str, key: str, command: str, timeout: float, what: str) -> str:
    """What ``command`` (the config's ``key``) prints, stripped; SourceError (one line, no output quoted) when it
    fails, hangs or prints nothing (``what``: "the password", "the access token")."""
    try:
        done = _read_bounded(command, timeout, SECRET_MAX)
    except subprocess.TimeoutExpired:
        raise SourceError(f"source {source!r}: {key} did not finish within {timeout:g}s") from None
    except OSError as exc:
        raise SourceError(f"source {source!r}: {key} could not be started ({type(exc).__name__})") from None
    if done is None:
        raise SourceError(f"source {source!r}: {key} printed more than {SECRET_MAX // 1024} KiB; it must print only {what} on stdout")
    status, stdout = done
    if status != 0:
        raise SourceError(
            f"source {source!r}: {key} failed with exit status {status}; run it by hand to see why (its output is not shown here)"
        )
    secret = stdout.decode("utf-8", "replace").strip()
    if not secret:
        raise SourceError(f"source {source!r}: {key} printed nothing; it must print {what} on stdout")
    return secret


def run_token_cmd(source: str, command: str, timeout: float = TOKEN_CMD_TIMEOUT) -> str:
    """The access token ``token_cmd`` prints (one word)."""
    token = run_secret_cmd(source, "token_cmd", command, timeout, "the access token")
    if any(c.isspace() for c in token):
        raise SourceError(f"source {source!r}: token_cmd printed more than one word; it must print only the access token on stdout")
    if not _BEARER.fullmatch(token):
        raise SourceError(f"source {source!r}: token_cmd printed something that is not an access token (letters, digits and "
                          "-._~+/ only, as RFC 6750 gives a bearer token); it must print only the access token on stdout")  # fmt: skip
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
