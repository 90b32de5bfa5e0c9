"""Bad inputs of OAuth2 sign-in for IMAP (``auth = "oauth2"``), run through the harness in ``tests/core/bad_inputs.py``.

None needs a server: each fails before memex connects (the config, the login files, the token helper, the
address pasted into ``memex auth --no-browser``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_config
from tests.core.bad_inputs import Case, run_case

GOOGLE = {"type": "imap", "host": "127.0.0.1", "port": 9, "security": "none", "user": "me@gmail.com", "auth": "oauth2",
          "provider": "google", "client_id": "1-abc.apps.googleusercontent.com", "client_secret": "GOCSPX-x"}  # fmt: skip


def mail_source(table: dict[str, Any], files: dict[str, str] | None = None) -> Callable[[Path], Path]:
    """A setup writing one imap source ``mail`` (and ``files`` under the state folder)."""

    def setup(tmp: Path) -> Path:
        path = write_config(tmp, {"mail": table}, state_dir=str(tmp / "state"))
        for name, text in (files or {}).items():
            (tmp / "state" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / "state" / name).write_text(text)
        return path

    return setup


CASES = [
    Case("oauth2-without-provider", ("poll", "mail"), 2, "sources.mail.provider",
         setup=mail_source({k: v for k, v in GOOGLE.items() if k != "provider"})),
    Case("oauth2-with-a-password", ("poll", "mail"), 2, "sources.mail.password_env", setup=mail_source({**GOOGLE, "password_env": "X"})),
    Case("oauth2-not-signed-in", ("poll", "mail"), 1, "not signed in; run `memex auth mail` to sign in again", setup=mail_source(GOOGLE)),
    Case("oauth2-login-file-corrupt", ("poll", "mail"), 1, "is corrupt; run `memex auth mail`",
         setup=mail_source(GOOGLE, {"auth/mail.oauth2.json": "{"})),
    Case("oauth2-refusal-remembered", ("poll", "mail"), 1, "remembered since",
         setup=mail_source(GOOGLE, {"auth/mail.signin-needed.json": '{"why": "the login expired or was revoked (invalid_grant)", "since": "x"}'})),
    Case("oauth2-refusal-file-corrupt", ("poll", "mail"), 1, "run `memex auth mail`",
         setup=mail_source(GOOGLE, {"auth/mail.signin-needed.json": "\x00garbage"})),
    Case("token-cmd-prints-nothing", ("poll", "mail"), 1, "token_cmd printed nothing",
         setup=mail_source({**{k: v for k, v in GOOGLE.items() if k not in ("client_id", "client_secret")}, "provider": "command", "token_cmd": "true"})),
    Case("token-cmd-prints-two-words", ("poll", "mail"), 1, "token_cmd printed more than one word",
         setup=mail_source({**{k: v for k, v in GOOGLE.items() if k not in ("client_id", "client_secret")}, "provider": "command",
                            "token_cmd": "echo secret-token \x1b[31mred"})),
    Case("auth-of-a-password-source", ("auth", "mail"), 2, "signs in with a password",
         setup=mail_source({"type": "imap", "host": "127.0.0.1", "user": "me", "password_env": "X"})),
    Case("auth-pasted-address-is-not-the-redirect", ("auth", "mail", "--no-browser"), 1, "that is not the address the browser was sent to",
         setup=mail_source(GOOGLE), input="https://example.com/?code=x\n", lines=4),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_oauth_input_gets_one_line_and_harms_nothing(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, no traceback, no raw escape, nothing changed outside the configured paths."""
    run_case(case, tmp_path)
