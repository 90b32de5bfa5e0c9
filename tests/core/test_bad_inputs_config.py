"""Bad config inputs (issue 32 §1, §3, §5, §6, §8) through the real CLI, with the harness in ``tests/core/bad_inputs.py``.

Rows: an existing state folder keeps its mode; ``memex demo`` never writes outside its folder; ``file://`` URLs with a host
or a relative path, endpoints and bucket names refused at load; an empty HOME refused; a BOM read; one broken source
section stops only itself (poll, status, dashboard, cron); ranges checked; Maildir and Messenger inputs warned about;
``index rebuild nosuch``, ``cursor set SOURCE null`` and ``cron --install`` misuse refused.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pollers.imessage import samples as imessage_samples
from tests.conftest import write_config
from tests.core.bad_inputs import Case, default_setup, run_case
from tests.email.test_maildir import deliver, mail, make_maildir

DB_OWNED = ("chat.db-wal", "chat.db-shm")  # SQLite's side files of the sample chat.db, made by reading it (as Messages.app has)
OWNED = ("state", "store", *DB_OWNED)
STATE_OWNED = ("data/cursors.json", "data/locks", "data/logs", "data/metrics", "data/search", "data/store", *DB_OWNED)
BAD_SECTIONS = {
    "no-type": {"db": "chat.db"},
    "interval-sixty": {"type": "imessage", "db": "chat.db", "interval": "sixty"},
    "start-yesterday": {"type": "imessage", "db": "chat.db", "start": "yesterday"},
    "enabled-no": {"type": "imessage", "db": "chat.db", "enabled": "no"},
    "interval-huge": {"type": "imessage", "db": "chat.db", "interval": 99999999999999999999},
    "interval-zero": {"type": "imessage", "db": "chat.db", "interval": 0},
}
BAD_KEYS = {"no-type": "type", "interval-sixty": "interval", "start-yesterday": "start", "enabled-no": "enabled",
            "interval-huge": "interval", "interval-zero": "interval"}  # fmt: skip


def with_db(tmp: Path) -> Path:
    """A small sample chat.db at ``tmp/chat.db``."""
    db = tmp / "chat.db"
    imessage_samples.build(db, 5, seed=3)
    return db


def text_config(body: str) -> Callable[[Path], Path]:
    """A setup writing ``body`` (``{tmp}`` replaced by the test's folder) as config.toml, beside a sample chat.db."""

    def setup(tmp: Path) -> Path:
        with_db(tmp)
        path = tmp / "config.toml"
        path.write_text(body.replace("{tmp}", str(tmp)))
        return path

    return setup


def store_url(url: str, **store: Any) -> Callable[[Path], Path]:
    """An iMessage source over a sample chat.db, with ``[store] url = URL`` (``{tmp}`` replaced)."""

    def setup(tmp: Path) -> Path:
        return write_config(tmp, {"imessage": {"type": "imessage", "db": str(with_db(tmp))}},
                            store={"url": url.replace("{tmp}", str(tmp)), **store})  # fmt: skip

    return setup


def existing_0755_state(tmp: Path) -> Path:
    """A state folder the user made 0755, holding a file of theirs; the config names it."""
    data = tmp / "data"
    data.mkdir()
    data.chmod(0o755)
    (data / "notes.txt").write_text("the user's own file\n")
    return write_config(tmp, {"imessage": {"type": "imessage", "db": str(with_db(tmp))}}, state_dir=data)


def demo_with(line: str) -> Callable[[Path], None]:
    """A demo folder whose config.toml (left there, or hand-written) holds ``line``; an outside folder (0755) beside it."""

    def setup(tmp: Path) -> None:
        outside = tmp / "outside"
        outside.mkdir()
        outside.chmod(0o755)
        (outside / "keep.txt").write_text("not memex's\n")
        demo = tmp / "demo"
        demo.mkdir()
        (demo / "config.toml").write_text(line.replace("{tmp}", str(tmp)) + '\n[sources.imessage]\ntype = "imessage"\ndb = "chat.db"\n')
        return None

    return setup


def broken_beside_good(kind: str) -> Callable[[Path], Path]:
    """A healthy source ``good`` over a sample chat.db, and a section ``bad`` broken as ``kind`` (:data:`BAD_SECTIONS`)."""

    def setup(tmp: Path) -> Path:
        with_db(tmp)
        return write_config(tmp, {"good": {"type": "imessage", "db": str(tmp / "chat.db")}, "bad": BAD_SECTIONS[kind]})

    return setup


def maildir_missing_folder(tmp: Path) -> Path:
    """A Maildir with one mail in INBOX; ``folders`` also names a folder that does not exist."""
    root = make_maildir(tmp / "Maildir")
    deliver(root, "1.host", mail(1))
    return write_config(tmp, {"md": {"type": "maildir", "path": str(root), "folders": ["INBOX", "NoSuchFolder"], "settle_seconds": 0}})


def messenger_bare_file(tmp: Path) -> Path:
    """A Messenger inbox holding a bare ``message_1.json`` (not inside an export or conversation folder)."""
    inbox = tmp / "inbox"
    inbox.mkdir()
    (inbox / "message_1.json").write_text('{"participants": [], "messages": []}')
    return write_config(tmp, {"fb": {"type": "messenger", "inbox": str(inbox), "settle_seconds": 0}})


def imap_password_env(tmp: Path) -> Path:
    """An IMAP source that reads its password from an environment variable (cron will not have it)."""
    return write_config(tmp, {"mail": {"type": "imap", "host": "127.0.0.1", "user": "u", "password_env": "MAIL_PASSWORD"}})


def fake_crontab(tmp: Path) -> dict[str, str]:
    """PATH with a ``crontab`` stand-in (``tests/core/fake_crontab.py``) storing into ``tmp/crontab.txt``."""
    from tests.core.test_cron_install import install_fake_crontab

    return install_fake_crontab(tmp)


def broken_block_crontab(tmp: Path) -> Path:
    """The fake crontab holding memex's begin marker without its end (a hand edit gone wrong)."""
    from memex.cli.cron_install import BEGIN

    fake_crontab(tmp)
    (tmp / "crontab.txt").write_text(f"{BEGIN}\n* * * * * true\n")
    return default_setup(tmp)


def bom_config(tmp: Path) -> Path:
    """A valid config saved with a UTF-8 byte order mark (as Windows editors write it)."""
    path = write_config(tmp, {"imessage": {"type": "imessage", "db": str(with_db(tmp))}})
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    return path


def no_state_dir(tmp: Path) -> Path:
    """A config naming no state_dir (the default, under HOME, applies)."""
    path = tmp / "config.toml"
    path.write_text('[sources.imessage]\ntype = "imessage"\ndb = "chat.db"\n')
    return path


NO_HOME = {"HOME": "", "XDG_STATE_HOME": "", "XDG_CONFIG_HOME": ""}
CRON_ENV = {"PATH": "{tmp}/bin:/usr/bin:/bin", "FAKE_CRONTAB": "{tmp}/crontab.txt"}

CASES = [
    # §1: what memex does not own
    Case("existing-0755-state-dir-keeps-its-mode", ("poll", "imessage"), 0, "", setup=existing_0755_state, owned=STATE_OWNED, lines=0),
    Case("demo-config-state-dir-outside", ("demo", "--dir", "demo"), 2, "key 'state_dir': points outside the demo folder",
         setup=demo_with('state_dir = "{tmp}/outside"'), owned=()),
    Case("demo-config-state-dir-parent", ("demo", "--dir", "demo"), 2, "points outside the demo folder",
         setup=demo_with('state_dir = ".."'), owned=()),
    Case("demo-config-store-outside", ("demo", "--dir", "demo"), 2, "key 'store.url': points outside the demo folder",
         setup=demo_with('state_dir = "state"\n[store]\nurl = "file://{tmp}/outside/store"'), owned=()),
    Case("demo-config-store-s3", ("demo", "--dir", "demo"), 2, "not s3://",
         setup=demo_with('state_dir = "state"\n[store]\nurl = "s3://memex-demo/x"'), owned=()),
    Case("demo-config-state-url", ("demo", "--dir", "demo"), 2, "key 'state_url'",
         setup=demo_with('state_dir = "state"\nstate_url = "s3://memex-demo/state"'), owned=()),
    Case("demo-config-metrics-outside", ("demo", "--dir", "demo"), 2, "key 'metrics_textfile'",
         setup=demo_with('state_dir = "state"\nmetrics_textfile = "{tmp}/outside/memex.prom"'), owned=()),
    Case("demo-config-default-state-dir-under-home", ("demo", "--dir", "demo"), 2, "points outside the demo folder",
         setup=demo_with('log_backups = 2'), env={"HOME": "{tmp}/outside", "XDG_STATE_HOME": ""}, owned=()),
    Case("demo-fresh-folder-writes-only-inside", ("demo", "--dir", "demo", "--messages", "5"), 0, "objects are in",
         setup=lambda tmp: None, owned=("demo",), lines=2),
    Case("store-file-url-tilde-host", ("poll", "imessage"), 2, "key 'store.url': a file:// URL cannot name a host ('~')",
         setup=store_url("file://~/memex-store")),
    Case("store-file-url-relative-host", ("poll", "imessage"), 2, "three slashes", setup=store_url("file://relative/store")),
    Case("store-file-url-relative-path", ("poll", "imessage"), 2, "a file: URL must start with file:///", setup=store_url("file:store")),
    Case("store-file-url-query", ("poll", "imessage"), 2, "query or fragment", setup=store_url("file://{tmp}/store?x=1")),
    Case("store-file-url-localhost-accepted", ("poll", "imessage"), 0, "", setup=store_url("file://localhost{tmp}/store"), owned=OWNED,
         lines=0),
    Case("endpoint-not-a-url", ("poll", "imessage"), 2, "key 'store.endpoint_url': must be an http:// or https:// URL",
         setup=store_url("s3://memex-test/x", endpoint_url="not a url")),
    Case("endpoint-ftp", ("status",), 2, "key 'store.endpoint_url'", setup=store_url("s3://memex-test/x", endpoint_url="ftp://host")),
    Case("endpoint-bad-port", ("poll", "imessage"), 2, "port is not a number",
         setup=store_url("s3://memex-test/x", endpoint_url="http://127.0.0.1:99999")),
    Case("bucket-bad-characters", ("poll", "imessage"), 2, "'Bad_Bucket!!' is not a valid S3 bucket name",
         setup=store_url("s3://Bad_Bucket!!/x")),
    Case("bucket-too-short", ("status",), 2, "'ab' is not a valid S3 bucket name", setup=store_url("s3://ab/x")),
    Case("bucket-ip-address", ("poll", "imessage"), 2, "not an IP address", setup=store_url("s3://192.168.1.1/x")),
    Case("state-url-bad-bucket", ("status",), 2, "key 'state_url': 'Bad_Bucket' is not a valid S3 bucket name",
         setup=text_config('state_url = "s3://Bad_Bucket/x"\n[sources.a]\ntype = "imessage"\ndb = "chat.db"\n')),
    Case("state-url-file", ("poll", "a"), 2, "key 'state_url': must be s3://bucket/prefix",
         setup=text_config('state_url = "file:///tmp/x"\n[sources.a]\ntype = "imessage"\ndb = "chat.db"\n')),
    Case("home-empty-default-state-dir", ("poll", "imessage"), 2, "HOME is empty", setup=no_state_dir, env=NO_HOME, owned=()),
    Case("home-empty-default-config", ("status",), 2, "HOME is empty", setup=lambda tmp: None, env=NO_HOME, owned=()),
    Case("home-empty-tilde-state-dir", ("status",), 2, "key 'state_dir': HOME is empty",
         setup=text_config('state_dir = "~/memex"\n'), env=NO_HOME, owned=()),
    Case("home-empty-tilde-store", ("status",), 2, "key 'store.url': HOME is empty",
         setup=text_config('state_dir = "state"\n[store]\nurl = "~/store"\n'), env=NO_HOME),
    # §5: a config saved with a byte order mark is read
    Case("config-with-utf8-bom", ("poll", "imessage"), 0, "", setup=bom_config, owned=OWNED, lines=0),
    # §3: one broken source stops only itself
    *[Case(f"broken-{kind}-poll-other", ("poll", "good"), 0, "", setup=broken_beside_good(kind), owned=OWNED, lines=0)
      for kind in BAD_SECTIONS],
    *[Case(f"broken-{kind}-poll-it", ("poll", "bad"), 2, f"sources.bad.{BAD_KEYS[kind]}", setup=broken_beside_good(kind))
      for kind in BAD_SECTIONS],
    Case("broken-section-status-shows-config-row", ("status",), 2, "config.toml: key 'sources.bad.start': must be \"beginning\" or \"now\"",
         setup=broken_beside_good("start-yesterday"), stream="stdout", lines=3),
    Case("broken-section-dashboard-once", ("dashboard", "--once", "--width", "200", "--height", "20"), 0,
         "config.toml: key 'sources.bad.type': required key is missing", setup=broken_beside_good("no-type"), stream="stdout", lines=20),
    Case("broken-section-cron-warns-and-lists-the-rest", ("cron",), 0, "key 'sources.bad.enabled'", setup=broken_beside_good("enabled-no")),
    Case("broken-section-verify-checks-the-rest", ("verify",), 0, "source not compared: config error: ", setup=broken_beside_good("no-type"),
         owned=OWNED, stream="stdout", lines=3),
    Case("log-max-bytes-huge", ("status",), 2, "key 'log_max_bytes': must be at most",
         setup=text_config("log_max_bytes = 99999999999999999999\n")),
    # §6: nothing bad silently accepted
    Case("maildir-no-such-folder-warns", ("poll", "md"), 0, "'NoSuchFolder' matches no folder", setup=maildir_missing_folder),
    Case("messenger-bare-message-json-warns", ("poll", "fb"), 0, "message_1.json: a thread file lying directly in the inbox",
         setup=messenger_bare_file),
    Case("index-rebuild-nosuch", ("index", "rebuild", "nosuch"), 2, "no source named 'nosuch' in the config or the store"),
    Case("cursor-set-null-needs-yes", ("cursor", "set", "imessage", "null"), 2, "pass --yes"),
    # §8: cron
    Case("cron-password-env-warns", ("cron",), 0, "sources.mail.password_env: cron starts polls with almost no environment",
         setup=imap_password_env),
    Case("cron-install-with-mailto", ("cron", "--install", "--mailto", "me@example.com"), 2, "--mailto goes with printing only"),
    Case("cron-install-and-uninstall", ("cron", "--install", "--uninstall"), 2, "not both"),
    Case("cron-install-without-crontab-program", ("cron", "--install"), 1, "no crontab program on PATH",
         env={"PATH": "{tmp}/nobin"}),
    Case("cron-install-broken-block", ("cron", "--install"), 1, "broken memex block", setup=broken_block_crontab, env=CRON_ENV,
         owned=("state", "store", "crontab.txt.calls")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_config_input_gets_one_line_and_harms_nothing(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, no traceback, no raw escape, nothing changed outside the configured paths."""
    run_case(replace(case, env={k: v.replace("{tmp}", str(tmp_path)) for k, v in case.env.items()}), tmp_path)
    if case.id.startswith("existing-0755"):
        assert stat.S_IMODE(os.stat(tmp_path / "data").st_mode) == 0o755
        assert {stat.S_IMODE(os.stat(tmp_path / "data" / n).st_mode) for n in ("locks", "logs", "store")} == {0o700}
    if case.id == "demo-fresh-folder-writes-only-inside":
        assert stat.S_IMODE(os.stat(tmp_path / "demo").st_mode) == 0o700
