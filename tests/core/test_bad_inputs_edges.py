"""Trust at the edges (issue 40 §2 and §4): a closed pipe, a query too deep or too long, system paths, a huge token,
a state folder that is a file, a command with no terminal, a mistyped key, an interrupted backfill. Each row is one
line and its exit code, through the harness in ``tests/core/bad_inputs.py``; the closed pipe is its own test (the
harness reads the output, so it cannot close it)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memex.search.parse import MAX_DEPTH, MAX_LENGTH, MAX_TERMS
from tests.conftest import ROOT, write_config
from tests.core.bad_inputs import Case, run_case

# -- a closed pipe (§2) --------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo archive (a sample chat.db polled into a file store, with its log, cursor and index): its config."""
    where = tmp_path_factory.mktemp("pipe") / "demo"
    out = subprocess.run([sys.executable, "-m", "memex", "demo", "--dir", str(where), "--messages", "40"],
                         capture_output=True, text=True, timeout=120, env={**_env(), "HOME": str(where.parent)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    return where / "config.toml"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMEX_CONFIG", "MEMEX_DEBUG")}
    env["PYTHONPATH"] = str(ROOT)
    return env


# Commands that write more than one line: the reader has gone before the first.
PIPED = [
    ("tail",),
    ("people",),
    ("cursor", "show"),
    ("status",),
    ("search", "*"),  # the entry's own path (no click)
    ("search", "--json", "*"),
    ("--debug", "search", "*"),  # the same through click
    ("index", "status"),
    ("--help",),
]


@pytest.mark.parametrize("args", PIPED, ids=[" ".join(a) for a in PIPED])
def test_a_closed_pipe_ends_the_command_quietly(demo: Path, args: tuple[str, ...]) -> None:
    """``memex tail | head -1`` once ``head`` has gone: no line on stderr (no "internal error", no traceback, no
    "Exception ignored" from the interpreter's last flush), exit 1, as ``ls | head`` ends (the reader's end is closed
    before the command starts, so every run is the case the issue met 5 times in 5)."""
    read, write = os.pipe()
    os.close(read)
    try:
        out = subprocess.run([sys.executable, "-m", "memex", "--config", str(demo), *args], stdout=write,
                             stderr=subprocess.PIPE, text=True, timeout=120, env=_env())  # fmt: skip
    finally:
        os.close(write)
    assert (out.returncode, out.stderr) == (1, ""), out.stderr


def test_a_pipe_read_to_its_end_is_no_error(demo: Path) -> None:
    """The other side of the closed-pipe rule: a reader that takes everything gets everything, exit 0 (the check asks
    the kernel whether the reader has gone, never guesses from the error alone)."""
    out = subprocess.run([sys.executable, "-m", "memex", "--config", str(demo), "search", "*"],
                         capture_output=True, text=True, timeout=120, env=_env())  # fmt: skip
    assert out.returncode == 0 and len(out.stdout.splitlines()) >= 20 and out.stderr == ""


# -- the bad-input table ---------------------------------------------------------


def _no_index(tmp: Path) -> Path:
    """A config with no index yet: a query past a limit is refused before the index is looked for."""
    return write_config(tmp, {})


DEEP = "(" * (MAX_DEPTH + 1) + "lunch" + ")" * (MAX_DEPTH + 1)

CASES = [
    # §2: a query past a limit is one line naming the limit, exit 2 (was RecursionError, SQLite's "parser stack overflow")
    Case("search-200-parentheses", ("search", "(" * 200 + "lunch" + ")" * 200), 2, f"more than {MAX_DEPTH} levels deep", setup=_no_index),
    Case("search-deeper-than-the-limit", ("search", DEEP), 2, f"more than {MAX_DEPTH} levels deep", setup=_no_index),
    Case("search-50-stacked-nots", ("search", "NOT " * 50 + "lunch"), 2, f"more than {MAX_DEPTH} levels deep", setup=_no_index),
    Case("search-nots-and-minus", ("search", "lunch -(" * (MAX_DEPTH // 2 + 1) + "NOT lunch" + ")" * (MAX_DEPTH // 2 + 1)), 2,
         "levels deep", setup=_no_index),
    Case("search-too-many-terms", ("search", " OR ".join(["source:x"] * (MAX_TERMS + 1))), 2, f"at most {MAX_TERMS}", setup=_no_index),
    Case("search-too-long", ("search", "x" * (MAX_LENGTH + 1)), 2, f"at most {MAX_LENGTH:,}", setup=_no_index),
    Case("search-deep-via-click", ("--debug", "search", DEEP), 2, "levels deep", setup=_no_index),
]  # fmt: skip


def _token_cmd(command: str) -> Callable[[Path], Path]:
    """An IMAP source whose OAuth2 token comes from ``command`` (nothing listens at its server: the token fails first)."""

    def setup(tmp: Path) -> Path:
        return write_config(tmp, {"mail": {"type": "imap", "host": "127.0.0.1", "port": 9, "security": "none", "user": "me@example.com",
                                           "auth": "oauth2", "provider": "command", "token_cmd": command}})  # fmt: skip

    return setup


def _google(tmp: Path) -> Path:
    return write_config(tmp, {"mail": {"type": "imap", "host": "127.0.0.1", "port": 9, "security": "none", "user": "me@gmail.com",
                                       "auth": "oauth2", "provider": "google", "client_id": "1-abc.apps.googleusercontent.com",
                                       "client_secret": "GOCSPX-x"}})  # fmt: skip


def _teams_offline(tmp: Path) -> Path:
    """A Teams source never signed in, whose identity platform cannot be reached (nothing listens there)."""
    dead = "https://127.0.0.1:9"
    return write_config(tmp, {"t": {"type": "teams", "authority": dead, "graph_url": dead, "timeout": 2}})


CASES += [
    # §4: a token helper printing 50 MB (was sent to the server as the token), or an endless stream, or not a token
    Case("token-cmd-prints-50-mb", ("poll", "mail", "--max-seconds", "5"), 1, "token_cmd printed more than 64 KiB",
         setup=_token_cmd("head -c 52428800 /dev/zero | tr '\\0' a")),
    Case("token-cmd-never-stops", ("poll", "mail", "--max-seconds", "5"), 1, "token_cmd printed more than 64 KiB", setup=_token_cmd("yes")),
    Case("token-cmd-prints-no-token", ("poll", "mail"), 1, "not an access token", setup=_token_cmd("echo 'tok\"en;'")),
    # §4: `memex auth --no-browser` with nothing to read the address from (was click's bare "Aborted!")
    Case("auth-with-no-terminal", ("auth", "mail", "--no-browser"), 1, "no address was pasted (the input ended)", setup=_google, lines=5),
    # §4: a Microsoft sign-in never done, its authority unreachable: never "the login is kept" (there is none)
    Case("auth-microsoft-never-signed-in-offline", ("auth", "t"), 1, "then run `memex auth t` (no one has signed in yet)",
         setup=_teams_offline, lines=2),  # urllib3's retry warning, in memex's log form, and the line
]  # fmt: skip


def _state_dir_a_file(tmp: Path) -> Path:
    (tmp / "state").write_text("not a folder\n")
    return write_config(tmp, {"imessage": {"type": "imessage", "db": str(tmp / "chat.db")}}, store={"url": str(tmp / "store")})


CASES += [
    # §4: `memex show` with state_dir a file (was: "no stored message has the native ID")
    Case("show-state-dir-a-file", ("show", "lunch@example.net"), 1, "state: is a file where memex needs a folder",
         setup=_state_dir_a_file, owned=("store",)),
]  # fmt: skip


def _mbox_key_mistyped(tmp: Path) -> Path:
    return write_config(tmp, {"mb": {"type": "mbox", "pathh": str(tmp / "mail.mbox")}})


def _quarantined_three(tmp: Path) -> Path:
    """A Maildir of three 0-byte files, polled once: 0 new, 3 quarantined."""
    from memex import config as memex_config
    from memex.runner import poll

    root = tmp / "Mail"
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True)
    for n in range(3):
        (root / "new" / f"{n}.host").write_bytes(b"")
    path = write_config(tmp, {"md": {"type": "maildir", "path": str(root), "settle_seconds": 0}})
    assert poll(memex_config.load(path), "md").quarantined == 3
    return path


CASES += [
    # §4: a mistyped required key is named (was only "required key is missing": the typo itself went unnamed)
    Case("config-mistyped-required-key", ("poll", "mb"), 2, "key 'sources.mb.path': required key is missing; the table has 'pathh': "
         "rename it to 'path'", setup=_mbox_key_mistyped),
    # §4: status shows what the last poll quarantined (was "ok: 0 new" after 3 quarantined)
    Case("status-shows-quarantined", ("status",), 0, "ok: 0 new, 3 quarantined", setup=_quarantined_three, stream="stdout", lines=2),
]  # fmt: skip


def _messenger_settling(tmp: Path) -> Path:
    """A Messenger inbox whose one export is still being written (settle_seconds not passed), polled once."""
    from memex import config as memex_config
    from memex.runner import poll

    (tmp / "inbox").mkdir()
    (tmp / "inbox" / "facebook-me.zip").write_bytes(b"PK\x03\x04")
    path = write_config(tmp, {"fb": {"type": "messenger", "inbox": str(tmp / "inbox"), "settle_seconds": 3600}})
    assert poll(memex_config.load(path), "fb").status == "idle"
    return path


CASES += [
    # §4: a Messenger export waiting to settle (was "idle: 0 new", as if nothing were coming)
    Case("status-says-an-export-is-settling", ("status",), 0, "idle: 0 new; waiting for 1 still being written to settle",
         setup=_messenger_settling, stream="stdout", lines=2),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_at_the_edges_gets_one_line(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and its one line, no traceback, no raw escape, nothing changed outside the configured
    paths."""
    out = run_case(case, tmp_path)
    assert "login is kept" not in out.stderr and "Aborted" not in out.stderr


# -- the same limits over MCP ---------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("(" * 200 + "lunch" + ")" * 200, "levels deep"),
        ("NOT " * 50 + "lunch", "levels deep"),
        ("lu\x00nch", "NUL"),
        (" ".join(["lunch"] * (MAX_TERMS + 1)), f"at most {MAX_TERMS}"),
    ],
    ids=["parentheses", "nots", "nul", "terms"],
)
def test_a_query_past_a_limit_over_mcp_names_the_limit_not_the_index(tmp_path: Path, query: str, says: str) -> None:
    """Over MCP the same query is one tool error naming the limit: never "cannot read the search index" nor advice
    to rebuild a healthy index (the index is there: the query is what is wrong)."""
    from memex.assistant.archive import Archive
    from memex.assistant.server import call
    from memex.config import load
    from memex.search.index import SearchIndex, index_path

    cfg = load(write_config(tmp_path, {}))
    index_path(cfg.state_dir).parent.mkdir(parents=True)
    SearchIndex(index_path(cfg.state_dir)).close()
    result = call(Archive(cfg), "search", {"query": query})
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert result.is_error and says in text and "rebuild" not in text and "index" not in text, text


# -- system paths (§4): a folder memex did not make is never advice to chmod it or to become its owner -------------

AS_NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
NOBODY = 65534


def _nobody_state(tmp: Path) -> Path:
    """A state folder of nobody's own (the shared folder is root's: nobody can make nothing in it)."""
    state = tmp / "state"
    state.mkdir(mode=0o700)
    os.chown(state, NOBODY, NOBODY)
    return state


def _state_dir_root(tmp: Path) -> Path:
    cfg = write_config(tmp, {"imessage": {"type": "imessage", "db": str(tmp / "chat.db")}}, state_dir="/")
    cfg.chmod(0o644)
    return cfg


def _store_at_usr(tmp: Path) -> Path:
    from pollers.imessage import samples

    samples.build(tmp / "chat.db", 3, wal=False)
    for path in tmp.glob("chat.db*"):
        path.chmod(0o644)
    cfg = write_config(tmp, {"imessage": {"type": "imessage", "db": str(tmp / "chat.db")}}, store={"url": "/usr"},
                       state_dir=str(_nobody_state(tmp)))  # fmt: skip
    cfg.chmod(0o644)
    return cfg


def _no_config(tmp: Path) -> None:
    return None


SYSTEM = [
    Case("state-dir-is-root", ("poll", "imessage"), 1, "/: cannot use the state folder: it is root's and not one memex made",
         setup=_state_dir_root),
    Case("store-at-usr", ("poll", "imessage"), 1, "/usr: permission denied; it is root's and not one memex made; choose a folder of your own",
         setup=_store_at_usr, owned=("state", "chat.db", "chat.db-wal", "chat.db-shm")),
    Case("demo-dir-root", ("demo", "--dir", "/"), 1, "/: permission denied; it is root's and not one memex made; choose a folder of your own",
         setup=_no_config),
    Case("verify-repair-store-at-usr", ("verify", "--repair"), 0, "0 objects read", setup=_store_at_usr, stream="stdout", lines=2,
         owned=("state", "chat.db", "chat.db-wal", "chat.db-shm")),
]  # fmt: skip


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Path]:
    """A folder of root's that nobody can read (pytest's own are private to root): skips unless root can drop to nobody."""
    import shutil
    import tempfile

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        if os.environ.get("CI"):
            raise AssertionError("these rows need root and setpriv on CI")
        pytest.skip("needs root and setpriv, to run memex as nobody")
    folder = Path(tempfile.mkdtemp(prefix="memex-edges-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("case", SYSTEM, ids=[c.id for c in SYSTEM])
def test_a_system_folder_is_never_advice_to_chmod_it_or_become_root(shared: Path, case: Case) -> None:
    """Run as nobody: the state folder ``/``, a store at ``/usr``, ``demo --dir /``: one line saying whose it is and
    to choose a folder of one's own, never "chmod/chown" nor "run memex as root"; ``verify --repair`` of a store at
    ``/usr`` reads only the store's own prefixes (walking all of ``/usr`` met a folder nobody cannot read)."""
    case.wrap = AS_NOBODY
    out = run_case(case, shared)
    for never in ("chmod", "chown", "as root", "run memex as"):
        assert never not in out.stderr, out.stderr


def test_verify_walks_only_the_stores_own_prefixes(tmp_path: Path) -> None:
    """A store folder that holds other files too (a store url of a shared folder): verify lists only attachments/,
    messages/, quarantine/ and revisions/; the rest is never read, not even counted."""
    from tests.conftest import run_cli

    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")}})
    store = tmp_path / "state" / "store"  # write_config's default store
    (store / "bin").mkdir(parents=True)
    (store / "bin" / "tool").write_bytes(b"\x7fELF")
    (store / "messages" / "x").mkdir(parents=True)
    (store / "messages" / "x" / "odd").write_bytes(b"?")
    out = run_cli("verify", "--json", config=cfg)
    import json

    doc = json.loads(out.stdout)
    assert (doc["objects"], doc["other_objects"]) == (1, 0), out.stdout + out.stderr  # messages/x/odd; never bin/tool


def test_cron_install_over_a_crontab_that_is_not_utf8_keeps_its_bytes(tmp_path: Path) -> None:
    """A crontab with a Latin-1 comment (was UnicodeDecodeError, an internal error): ``cron --install`` adds memex's
    block and keeps every byte of the user's lines as they were."""
    from tests.conftest import run_cli
    from tests.core.test_cron_install import install_fake_crontab

    env = install_fake_crontab(tmp_path)
    mine = b"# sauvegarde du caf\xe9\n0 3 * * * /usr/local/bin/backup --all\n"
    Path(env["FAKE_CRONTAB"]).write_bytes(mine)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")}})
    out = run_cli("cron", "--install", config=cfg, env={**_env(), **env})
    assert out.returncode == 0 and "internal error" not in out.stderr, out.stderr
    after = Path(env["FAKE_CRONTAB"]).read_bytes()
    assert after.startswith(mine) and b"# >>> memex" in after and b"poll imessage" in after, after


def test_a_log_that_cannot_be_written_is_no_traceback_from_the_index_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk under the state folder: the background index update fails, and so does the log its warning goes
    to (:class:`memex.observe.logs.LogUnwritable`, raised as the real logger raises it). The thread ends quietly (the
    poll's own next log line meets the same fault and says it once); no traceback from the thread (was: the right
    line, then a raw ``LogUnwritable`` traceback)."""
    import threading

    from memex import config as memex_config
    from memex.observe.logs import LogUnwritable
    from memex.search.build import Follower
    from memex.search.index import SearchIndex
    from memex.store import open_store
    from pollers.imessage import samples
    from tests.conftest import run_cli

    samples.build(tmp_path / "chat.db", 3)
    path = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")}})
    assert run_cli("poll", "imessage", config=path).returncode == 0
    cfg = memex_config.load(path)
    with SearchIndex.open(cfg.state_dir, writer=True) as index:
        index.db.execute("PRAGMA user_version = 99")  # the update will fail, and warn
    store = open_store(cfg.store)
    records = [(k, store.get(k) or b"") for k in store.list_keys("messages/")]

    class FullDiskLog:
        """What :class:`memex.observe.logs.JsonLog` does when its file is on a full disk: raise on every event."""

        def _emit(self, event: str, **kw: object) -> None:
            raise LogUnwritable(f"{cfg.state_dir}/logs/imessage.jsonl: no space left on the disk holding it", said=False)

        info = warning = error = debug = _emit

    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    follower = Follower(cfg, "imessage", "poll", FullDiskLog(), background=True)  # type: ignore[arg-type]
    follower.whole = True
    follower.after_commit(records, store)
    follower.finish()
    assert raised == [] and not follower.whole


def test_show_writes_every_time_in_one_format() -> None:
    """A record's ``sent_at`` with ``Z`` and microseconds, another's with an offset, a revision's: ``memex show`` writes
    each as UTC to the second (``2024-03-01 09:30:00Z``, the form of status and tail), never two formats."""
    from memex.cli.show import human

    zulu = {"source": "s", "native_id": "a", "sent_at": "2024-03-01T09:30:00.123456Z", "text": "x"}
    offset = {"source": "s", "native_id": "b", "sent_at": "2024-03-01T11:30:00+02:00", "text": "y"}
    revision = ("revisions/s/b/r.json", {"revision": {"at": "2024-03-02T01:00:00-05:00", "kind": "edit"}, "text": "z"})
    assert "sent:         2024-03-01 09:30:00Z" in human("messages/s/a.json", zulu, [])
    shown = human("messages/s/b.json", offset, [revision])
    assert "sent:         2024-03-01 09:30:00Z" in shown and "  2024-03-02 06:00:00Z  edit: z" in shown, shown
    assert "sent:         ?" in human("messages/s/c.json", {"source": "s"}, [])


def test_a_stopped_backfill_reads_without_a_repr_and_a_finished_one_hints_restart(tmp_path: Path) -> None:
    """The log line of a backfill (``memex tail``, and the console's echo of its warning when stopped) names its
    checkpoint as ``rowid:N``, never Python's ``{'rowid': N}``; run again after it finished, its summary says that
    ``--restart`` reads the whole history again (it found nothing past the end)."""
    from memex.backfill.report import BackfillResult
    from memex.observe.logs import human_line

    line = human_line({"event": "backfill.finished", "source": "im", "level": "warning", "status": "stopped", "new": 0, "dup": 16000,
                       "quarantined": 0, "failed": 0, "checkpoint": {"rowid": 16000}})  # fmt: skip
    assert line == "im: backfill stopped: 0 new, 16000 dup, 0 quarantined, 0 failed (checkpoint rowid:16000)"
    other = human_line({"event": "cursor.set", "source": "m", "level": "warning", "before": {"INBOX": 3, "Sent": 1}, "after": {}})
    assert "{" not in other and "before=INBOX:3,Sent:1 after=-" in other, other
    again = BackfillResult(source="im", finished_before=True)
    assert again.human().endswith("it had finished before: add --restart to read the whole history again")
    assert "--restart" not in BackfillResult(source="im", finished_before=True, new=3).human()


def test_a_duplicate_handed_to_the_index_again_rewrites_nothing(tmp_path: Path) -> None:
    """A backfill hands every duplicate to the index (a crash may have kept it out): one already indexed exactly so
    costs a read, not its words out of FTS5 and back in (a stopped backfill of 16,000 duplicates waited 13 s for
    that before exiting); a record that did change is still refreshed."""
    from memex.search.index import SearchIndex
    from tests.core.test_search_query import _records

    records = _records()
    with SearchIndex(tmp_path / "index.sqlite") as index:
        index.add(records)
        before = index.db.total_changes
        index.add(records)
        assert index.db.total_changes - before == len({key.split("/")[1] for key, _ in records})  # each source's added_at
        changed = [(key, {**doc, "text": "quokka"}) if doc["native_id"] == "a" else (key, doc) for key, doc in records]
        index.add(changed)
        found = index.db.execute("SELECT native_id FROM messages WHERE id IN (SELECT rowid FROM fts WHERE fts MATCH 'quokka')")
        assert [r[0] for r in found] == ["a"]
