"""Where logins are kept: private files under ``<state_dir>/auth/``, and the remembered refusal.

A login file is written only through :func:`save`: a 0600 temp file in the 0700 folder, fsynced, renamed over,
under a lock, and (for a poll's refresh) only if the file still holds what the poll read, so a ``memex auth``
that signed in meanwhile is never overwritten by the stale login a running poll held.

A refusal (:func:`remember_refusal`) is a small JSON file naming *why* (an error code, never a token or the
provider's description) and *since when*; :func:`check_refusal` raises :class:`~memex.errors.AuthRequired`
from it before any request, and :func:`clear_refusal` removes it when a sign-in succeeds.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from memex.errors import AuthRequired
from memex.state.files import ensure_private_dir, fsync_dir, write_temp

# Error codes that no retry cures: the login is gone until the user signs in again (RFC 6749 §5.2, MSAL, Google).
FOR_GOOD = frozenset(
    {"invalid_grant", "interaction_required", "consent_required", "login_required", "invalid_client", "unauthorized_client"}
)
_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def auth_dir(state_dir: Path) -> Path:
    """The folder of every source's login."""
    return state_dir / "auth"


def safe_code(value: object) -> str:
    """An error code from an identity provider's answer, only if it looks like one (never free text)."""
    return value if isinstance(value, str) and _CODE.match(value) else "unknown_error"


def read(path: Path) -> str | None:
    """A login file's text, or None when there is none."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def save(path: Path, text: str, *, expect: str | None, sign_in: bool) -> bool:
    """Replace ``path`` with ``text`` (0600, atomic, durable); unless ``sign_in``, only if it still holds ``expect``.

    Returns whether it was written (False: another sign-in replaced the file meanwhile, and that login wins).
    """
    from memex.state.locks import exclusive

    folder = ensure_private_dir(path.parent)
    with exclusive(folder / f".{path.name}.lock"):
        if not sign_in and read(path) != expect:
            return False
        tmp = write_temp(folder, path.name, text.encode("utf-8"))
        os.replace(tmp, path)
        fsync_dir(folder)
    return True


def refusal_path(state_dir: Path, source: str) -> Path:
    """Where a source's remembered refusal lives."""
    return auth_dir(state_dir) / f"{source}.signin-needed.json"


def remember_refusal(state_dir: Path, source: str, why: str) -> None:
    """Remember that ``source``'s login was refused for good (``why``: a short reason with an error code, no secret)."""
    body = json.dumps({"why": why, "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    path = refusal_path(state_dir, source)
    save(path, body, expect=None, sign_in=True)


def check_refusal(state_dir: Path, source: str) -> None:
    """Raise AuthRequired when a refusal is remembered: no request goes to the identity provider until a sign-in."""
    text = read(refusal_path(state_dir, source))
    if text is None:
        return
    try:
        doc = json.loads(text)
        why, since = str(doc["why"]), str(doc["since"])
    except (ValueError, KeyError, TypeError):
        why, since = "the login was refused", "an earlier poll"
    raise AuthRequired(source, f"{why} (remembered since {since}; not asked again)")


def clear_refusal(state_dir: Path, source: str) -> None:
    """Forget a remembered refusal (a sign-in succeeded)."""
    path = refusal_path(state_dir, source)
    try:
        path.unlink()
    except FileNotFoundError:
        return
    fsync_dir(path.parent)
