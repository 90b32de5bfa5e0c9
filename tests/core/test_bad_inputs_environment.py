"""The environment fails (issue 32 §4): a full disk, a read-only mount, a permission, a file in the way, a link loop, a
name too long, on the store, the state folder, the logs and the search index, in every command. Each is one line
naming the path, the cause in words and what to do, exit 1, never "internal error".

The file systems are real: a small tmpfs (full: a filler file takes its space; read-only: mounted ``ro``), mounted
under the test's folder and unmounted after it. Mounting needs root; without it these rows skip, and fail on CI
(``$CI`` set), like the strace tests. A permission is made by running the CLI without the capabilities that let root
pass permission bits (``setpriv``), so the folder's own mode counts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.core.bad_inputs import Case, run_case

MESSAGES = 3


# -- the world ---------------------------------------------------------------


def can_mount() -> str | None:
    """None when this process can mount a tmpfs, else why not."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount(8) is not installed"
    return None


def need_mount() -> None:
    """Skip without mount rights; on CI that is a failure (a skipped full-disk test proves nothing)."""
    why = can_mount()
    if why is not None:
        if os.environ.get("CI"):
            raise AssertionError(f"the full-disk tests cannot run on CI: {why}")
        pytest.skip(why)


def mount_tmpfs(at: Path, *, kib: int = 64, full: bool = False, readonly: bool = False) -> None:
    """A tmpfs of ``kib`` KiB at ``at`` (0700, like a folder memex made): filled to the last block, or read-only."""
    at.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k,mode=0700", "tmpfs", str(at)], capture_output=True, text=True)
    if out.returncode != 0:
        if os.environ.get("CI"):
            raise AssertionError(f"mount failed on CI: {out.stderr.strip()}")
        pytest.skip(f"mount is not permitted here: {out.stderr.strip()}")
    if full:
        fill(at)
    if readonly:
        subprocess.run(["mount", "-o", "remount,ro", str(at)], check=True)


def fill(disk: Path) -> Path:
    """Write ``disk/.filler`` until the file system says it is full; the filler's path."""
    filler = disk / ".filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while os.write(fd, b"\0" * 512):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def unmount_below(root: Path) -> None:
    """Unmount every file system mounted at or below ``root`` (deepest first)."""
    with open("/proc/self/mounts") as fh:
        points = [line.split()[1].encode().decode("unicode_escape") for line in fh]
    for point in sorted((p for p in points if p == str(root) or p.startswith(f"{root}/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


def maildir(tmp: Path) -> Path:
    """A Maildir holding a few messages (each a few KiB, more than a full disk has left)."""
    root = tmp / "md"
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for n in range(MESSAGES):
        body = ("lorem ipsum dolor sit amet " * 200).encode()
        (root / "new" / f"m{n}").write_bytes(b"From: a@example.com\nSubject: s%d\nMessage-ID: <m%d@example.com>\n\n" % (n, n) + body)
    return root


def config(tmp: Path, *, store: Path | None = None, state: Path | None = None, **more: object) -> Path:
    """A Maildir source ``md`` over :func:`maildir`, storing into ``store`` with state in ``state``."""
    table = {"type": "maildir", "path": str(maildir(tmp)), "settle_seconds": 0}
    return write_config(tmp, {"md": table}, {"url": (store or tmp / "store").as_uri()}, state_dir=state or tmp / "state", **more)


Setup = Callable[[Path], Path | None]


def store_mount(**how: bool) -> Setup:
    """The store on a small tmpfs (``full`` or ``readonly``)."""

    def setup(tmp: Path) -> Path:
        need_mount()
        mount_tmpfs(tmp / "store", **how)
        return config(tmp)

    return setup


def state_mount(sub: str = "", *, full: bool = False, readonly: bool = False, keep: bool = False, more: bool = False) -> Setup:
    """The state folder (or ``sub`` of it: logs, search) on a small tmpfs, after one good poll made the rest.

    ``keep``: what the poll wrote there is copied onto the tmpfs first (an index to read); ``more``: new messages
    arrive after that poll (so the next has something to store and index).
    """

    def setup(tmp: Path) -> Path:
        need_mount()
        cfg = config(tmp, search_index=True)
        at = tmp / "state" / sub if sub else tmp / "state"
        saved = tmp / "saved"
        if sub:
            _poll(cfg)
            if at.exists():
                shutil.copytree(at, saved) if keep else None
                shutil.rmtree(at)
        mount_tmpfs(at, kib=1024 if keep else 64, full=full)
        if keep and saved.exists():
            shutil.copytree(saved, at, dirs_exist_ok=True)
            shutil.rmtree(saved)
        if readonly:
            subprocess.run(["mount", "-o", "remount,ro", str(at)], check=True)
        if more:
            for n in range(MESSAGES, 2 * MESSAGES):
                (tmp / "md" / "new" / f"m{n}").write_bytes(b"Subject: s\nMessage-ID: <m%d@example.com>\n\nlorem\n" % n)
        return cfg

    return setup


def demo_mount(**how: bool) -> Setup:
    """A small tmpfs at ``ro`` for `memex demo --dir ro/demo` (no config: the demo writes its own)."""

    def setup(tmp: Path) -> None:
        need_mount()
        mount_tmpfs(tmp / "ro", **how)
        return None

    return setup


def _poll(cfg: Path) -> None:
    out = subprocess.run([*_memex(), "--config", str(cfg), "poll", "md"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})  # fmt: skip
    assert out.returncode == 0, out.stderr


def _memex() -> list[str]:
    import sys

    return [sys.executable, "-m", "memex"]


def file_in_the_way(where: str, *, after_poll: bool = False) -> Setup:
    """A regular file where memex needs a folder: ``state``, ``state/logs``, ``state/search`` or the store's parent."""

    def setup(tmp: Path) -> Path:
        if where == "store-parent":
            (tmp / "blocker").write_text("not a folder\n")
            return config(tmp, store=tmp / "blocker" / "store")
        cfg = config(tmp, search_index=True)
        if after_poll:
            _poll(cfg)
        target = tmp / where
        if target.is_dir():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("not a folder\n")
        return cfg

    return setup


def folder_in_the_way(where: str) -> Setup:
    """A folder where memex keeps a file (``state/cursors.json``)."""

    def setup(tmp: Path) -> Path:
        cfg = config(tmp)
        (tmp / where).mkdir(parents=True)
        return cfg

    return setup


def link_loop(which: str) -> Setup:
    """The store or state folder is a symbolic link that points at itself through a second one."""

    def setup(tmp: Path) -> Path:
        os.symlink(tmp / f"{which}-b", tmp / which)
        os.symlink(tmp / which, tmp / f"{which}-b")
        return config(tmp)

    return setup


def long_name(which: str) -> Setup:
    """The store or state folder's last part is longer than any file system allows (255 bytes)."""

    def setup(tmp: Path) -> Path:
        long = tmp / which / ("x" * 300)
        return config(tmp, **{which: long})  # type: ignore[arg-type]

    return setup


def cursor_of(value: object, *, source: dict[str, object] | None = None) -> Setup:
    """A ``cursors.json`` edited by hand: source ``s``'s cursor is ``value`` (a Maildir source unless ``source``)."""

    def setup(tmp: Path) -> Path:
        table = source or {"type": "maildir", "path": str(maildir(tmp)), "settle_seconds": 0}
        if callable(table.get("make")):
            table = table["make"](tmp)  # type: ignore[operator]
        cfg = write_config(tmp, {"s": table}, {"url": (tmp / "store").as_uri()})
        state = tmp / "state"
        state.mkdir(mode=0o700)
        doc = {"format": 1, "sources": {"s": {"cursor": value, "positions": {}}}}
        (state / "cursors.json").write_text(json.dumps(doc))
        return cfg

    return setup


def imessage(tmp: Path) -> dict[str, object]:
    """An iMessage source over a real chat.db in the sample schema."""
    from pollers.imessage import samples

    samples.build(tmp / "chat.db", 3)
    return {"type": "imessage", "db": str(tmp / "chat.db")}


def messenger(tmp: Path) -> dict[str, object]:
    """A Messenger source over an empty inbox folder."""
    (tmp / "inbox").mkdir()
    return {"type": "messenger", "inbox": str(tmp / "inbox")}


def imap(tmp: Path) -> dict[str, object]:
    """An IMAP source at a port nothing listens on (the cursor is checked before any connection)."""
    return {"type": "imap", "host": "127.0.0.1", "port": 9, "user": "u", "password_env": "NO_SUCH_PASSWORD", "security": "none"}


HOLDERS: list[subprocess.Popen[str]] = []  # processes a row's setup started (a writer holding chat.db); ended after the row

HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


def chat_db_busy(tmp: Path) -> Path:
    """A chat.db (rollback journal, as older macOS) that another process holds in an exclusive write transaction."""
    import sys

    from pollers.imessage import samples

    samples.build(tmp / "chat.db", 3, wal=False)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp / "chat.db")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    HOLDERS.append(holder)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return write_config(tmp, {"im": {"type": "imessage", "db": str(tmp / "chat.db")}})


def teams_offline(tmp: Path) -> Path:
    """A Teams source never signed in, whose identity platform and Graph cannot be reached (nothing listens there)."""
    dead = "https://127.0.0.1:9"
    return write_config(tmp, {"t": {"type": "teams", "authority": dead, "graph_url": dead, "timeout": 2}})


def read_only_beside_config(tmp: Path) -> Path:
    """A config, and a read-only tmpfs at ``ro`` for a command that writes files where it is told (launchd --write)."""
    need_mount()
    mount_tmpfs(tmp / "ro", readonly=True)
    return config(tmp)


def state_file_teams(tmp: Path) -> Path:
    """A Teams source whose state_dir (where its login is kept) is a regular file."""
    (tmp / "state").write_text("not a folder\n")
    return write_config(tmp, {"t": {"type": "teams", "authority": "https://127.0.0.1:9", "graph_url": "https://127.0.0.1:9"}})


def signal_without_desktop(tmp: Path) -> Path:
    """A Signal source with no Signal Desktop folder: its live poll works, it has no history to walk."""
    return write_config(tmp, {"sig": {"type": "signal", "account": "+15555550100"}})


def chat_db_without(*dropped: str) -> Setup:
    """A chat.db whose ``message`` table lacks ``dropped`` columns (a file of another program, or a macOS memex does not read)."""

    def setup(tmp: Path) -> Path:
        import sqlite3

        from pollers.imessage import samples

        samples.build(tmp / "chat.db", 3, wal=False)
        conn = sqlite3.connect(tmp / "chat.db")
        cols = [row[1] for row in conn.execute("PRAGMA table_info(message)") if row[1] not in dropped]
        conn.executescript(
            f"CREATE TABLE m2 AS SELECT {', '.join(cols)} FROM message; DROP TABLE message; ALTER TABLE m2 RENAME TO message;"
        )
        conn.close()
        return write_config(tmp, {"im": {"type": "imessage", "db": str(tmp / "chat.db")}})

    return setup


def teams(tmp: Path) -> dict[str, object]:
    """A Teams source signed in to nothing (the cursor is checked before any sign-in or request)."""
    dead = "https://127.0.0.1:9"
    return {"type": "teams", "authority": dead, "graph_url": dead, "timeout": 2}


def signal(tmp: Path) -> dict[str, object]:
    """A Signal source whose signal-cli is not installed (the cursor is checked before it would run)."""
    return {"type": "signal", "account": "+15555550100", "executable": str(tmp / "no-signal-cli")}


# Without CAP_DAC_OVERRIDE root obeys permission bits like any user: a 0500 folder of root's cannot be written to.
CAPS = "-dac_override,-dac_read_search,-fowner"
NO_OVERRIDE = ("setpriv", f"--inh-caps={CAPS}", f"--bounding-set={CAPS}", "--")


def foreign_folder(which: str) -> Setup:
    """The store or state folder is another user's (nobody's, 0700), and the CLI runs without root's override."""

    def setup(tmp: Path) -> Path:
        cfg = config(tmp)
        (tmp / which).mkdir(mode=0o700)
        os.chown(tmp / which, 65534, 65534)
        return cfg

    return setup


FULL = "no space left on the disk holding it"
RO = "its file system is mounted read-only"
NOTDIR = "is a file where memex needs a folder"
ISDIR = "is a folder where memex needs a file"
LOOP = "is a symbolic link that loops"
LONG = "the path is too long for its file system"
DENIED = "permission denied"
CURSOR = "memex cursor set s VALUE"

CASES = [
    # the store
    Case("store-full-poll", ("poll", "md"), 1, f"store/.memex-tmp: {FULL}", store_mount(full=True)),
    Case("store-full-backfill", ("backfill", "md"), 1, FULL, store_mount(full=True), lines=MESSAGES + 1),
    Case("store-readonly-poll", ("poll", "md"), 1, RO, store_mount(readonly=True)),
    Case("store-readonly-backfill", ("backfill", "md"), 1, RO, store_mount(readonly=True), lines=MESSAGES + 1),
    Case("store-parent-is-a-file", ("poll", "md"), 1, f"blocker: {NOTDIR}", file_in_the_way("store-parent"), owned=("state", "blocker")),
    Case("store-link-loop", ("poll", "md"), 1, f"store: {LOOP}", link_loop("store"), owned=("state", "store", "store-b")),
    Case(
        "store-link-loop-show", ("show", "messages/md/x.json"), 1, f"store: {LOOP}", link_loop("store"), owned=("state", "store", "store-b")
    ),
    Case("store-link-loop-verify", ("verify", "md"), 1, f"store: {LOOP}", link_loop("store"), owned=("state", "store", "store-b")),
    Case("demo-on-a-read-only-disk", ("demo", "--dir", "ro/demo"), 1, RO, demo_mount(readonly=True), owned=("ro",)),
    Case("demo-on-a-full-disk", ("demo", "--dir", "ro/demo"), 1, FULL, demo_mount(full=True), owned=("ro",)),
    Case("store-name-too-long", ("poll", "md"), 1, LONG, long_name("store")),
    Case("store-no-write-permission", ("poll", "md"), 1, f"store: {DENIED}", foreign_folder("store")),
    # the state folder
    Case("state-full-poll", ("poll", "md"), 1, FULL, state_mount(full=True)),
    Case("state-readonly-poll", ("poll", "md"), 1, RO, state_mount(readonly=True)),
    Case("state-readonly-cursor-set", ("cursor", "reset", "md", "--yes"), 1, RO, state_mount(readonly=True)),
    Case("state-is-a-file-poll", ("poll", "md"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-poll-all", ("poll", "--all"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-dashboard", ("dashboard", "--once"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-tail", ("tail",), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-index-rebuild", ("index", "rebuild"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-status", ("status",), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-cursor-show", ("cursor", "show"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-search", ("search", "lorem"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-verify", ("verify", "md"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-index-status", ("index", "status"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-backfill", ("backfill", "md"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-watch", ("watch", "md"), 1, f"state: {NOTDIR}", file_in_the_way("state")),
    Case("state-is-a-file-auth", ("auth", "t"), 1, f"state: {NOTDIR}", state_file_teams),
    Case("launchd-write-read-only", ("launchd", "--write", "ro/agents"), 1, RO, read_only_beside_config, owned=("ro",)),
    Case("state-link-loop", ("poll", "md"), 1, f"state: {LOOP}", link_loop("state"), owned=("state", "store", "state-b")),
    Case("state-name-too-long", ("poll", "md"), 1, LONG, long_name("state")),
    Case("state-no-write-permission", ("poll", "md"), 1, "cannot use the state folder", foreign_folder("state")),
    Case("cursors-json-is-a-folder-poll", ("poll", "md"), 1, f"cursors.json: {ISDIR}", folder_in_the_way("state/cursors.json")),
    Case("cursors-json-is-a-folder-status", ("status",), 1, f"cursors.json: {ISDIR}", folder_in_the_way("state/cursors.json")),
    Case("cursors-json-is-a-folder-cursor-show", ("cursor", "show"), 1, f"cursors.json: {ISDIR}", folder_in_the_way("state/cursors.json")),
    # the logs
    Case("logs-is-a-file-poll", ("poll", "md"), 1, f"state/logs: {NOTDIR}", file_in_the_way("state/logs", after_poll=True)),
    Case("logs-readonly-poll", ("poll", "md"), 1, RO, state_mount("logs", readonly=True)),
    Case("logs-full-poll", ("poll", "md"), 1, FULL, state_mount("logs", full=True)),
    Case("logs-readonly-cursor-reset", ("cursor", "reset", "md", "--yes"), 1, RO, state_mount("logs", readonly=True)),
    Case("logs-full-backfill", ("backfill", "md"), 1, FULL, state_mount("logs", full=True)),
    # the search index
    # a poll whose messages are stored but whose index cannot follow: warnings (the index is kept in step later), exit 0
    Case("index-full-poll", ("poll", "md"), 0, f"{FULL}; free space on that disk", state_mount("search", full=True, more=True), lines=2),
    Case("index-readonly-search", ("search", "lorem"), 1, RO, state_mount("search", readonly=True, keep=True)),
    Case("index-readonly-index-status", ("index", "status"), 1, RO, state_mount("search", readonly=True, keep=True)),
    Case("index-readonly-rebuild", ("index", "rebuild"), 1, RO, state_mount("search", readonly=True)),
    Case("index-full-rebuild", ("index", "rebuild"), 1, FULL, state_mount("search", full=True)),
    Case("index-is-a-file-search", ("search", "lorem"), 1, f"state/search: {NOTDIR}", file_in_the_way("state/search", after_poll=True)),
    Case("index-is-a-file-rebuild", ("index", "rebuild"), 1, f"state/search: {NOTDIR}", file_in_the_way("state/search", after_poll=True)),
    # remedies that point the right way (issue 32 §5)
    Case(
        "chat-db-busy",
        ("poll", "im", "--max-seconds", "60"),
        1,
        "chat.db is busy: another program holds it locked",
        chat_db_busy,
        owned=("state", "store", "chat.db-journal"),
    ),
    Case(
        "chat-db-missing-columns",
        ("poll", "im"),
        1,
        "lacks message.guid, message.date: not a Messages database of a macOS version",
        chat_db_without("guid", "date"),
    ),
    Case("teams-never-signed-in-offline", ("poll", "t"), 1, "t: not signed in to Microsoft; run `memex auth t` to sign in", teams_offline),
    Case("backfill-signal-without-history", ("backfill", "sig"), 2, "sources.sig.desktop_dir", signal_without_desktop),
    # a cursor edited by hand into the wrong type, every built-in source
    Case("cursor-wrong-type-maildir", ("poll", "s"), 1, CURSOR, cursor_of(5)),
    Case("cursor-wrong-type-maildir-names", ("poll", "s"), 1, CURSOR, cursor_of({"folders": {"new": {"ctime_ns": 1, "names": [3]}}})),
    Case("cursor-wrong-type-imessage", ("poll", "s"), 1, CURSOR, cursor_of("rowid=5", source={"make": imessage})),
    Case("cursor-wrong-type-messenger", ("poll", "s"), 1, CURSOR, cursor_of([1, 2], source={"make": messenger})),
    Case("cursor-wrong-type-imap", ("poll", "s"), 1, CURSOR, cursor_of({"mailboxes": {"INBOX": 7}}, source={"make": imap})),
    Case("cursor-wrong-type-teams", ("poll", "s"), 1, CURSOR, cursor_of({"chats": []}, source={"make": teams})),
    Case("cursor-wrong-type-signal", ("poll", "s"), 1, CURSOR, cursor_of({"lines": "12"}, source={"make": signal})),
]

WRAPPED = {"store-no-write-permission", "state-no-write-permission"}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Path]:
    """The test's folder; every file system mounted below it is unmounted afterwards."""
    try:
        yield tmp_path
    finally:
        unmount_below(tmp_path)
        while HOLDERS:
            holder = HOLDERS.pop()
            holder.communicate("")  # its stdin closed: it ends, and its lock with it


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_an_environment_failure_is_one_line_naming_the_path(world: Path, case: Case) -> None:
    """Each row: exit 1, one line naming the path (or the source), the cause and the fix; no internal error, no traceback."""
    if case.id in WRAPPED:
        if shutil.which("setpriv") is None or os.geteuid() != 0:
            if os.environ.get("CI"):
                raise AssertionError("setpriv (util-linux) is needed on CI to run as root without its permission override")
            pytest.skip("needs root and setpriv to make a permission hold for root")
        case.wrap = NO_OVERRIDE
    out = run_case(case, world)
    assert "please report" not in out.stderr


def test_a_hand_edited_cursor_fails_the_poll_and_status_shows_failing_not_ok(tmp_path: Path) -> None:
    """After a good poll, cursors.json edited so the source's cursor is a number: `memex status` shows FAILING naming
    `memex cursor set/reset` even before a poll meets it; verify and the poll are that one line (exit 1, the poller
    never sees the cursor), the file is left as the user wrote it, and `memex cursor reset` is the way out."""
    from tests.conftest import run_cli

    cfg = config(tmp_path)
    assert run_cli("poll", "md", config=cfg).returncode == 0
    cursors = tmp_path / "state" / "cursors.json"
    doc = json.loads(cursors.read_text())
    doc["sources"]["md"]["cursor"] = 5
    cursors.write_text(json.dumps(doc))
    before = cursors.read_bytes()
    row = json.loads(run_cli("status", "--json", config=cfg).stdout)[0]  # before any poll meets it
    assert row["state"] == "FAILING" and "memex cursor set md VALUE" in row["state_reason"], row
    verify = run_cli("verify", "md", config=cfg)
    assert verify.returncode == 1 and "the stored cursor of source 'md'" in verify.stderr, verify.stderr
    assert "internal error" not in verify.stderr and len(verify.stderr.strip().splitlines()) == 1
    out = run_cli("poll", "md", config=cfg)
    assert out.returncode == 1 and "`memex cursor set md VALUE`" in out.stderr and "memex cursor reset md" in out.stderr, out.stderr
    assert "internal error" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    row = json.loads(run_cli("status", "--json", config=cfg).stdout)[0]
    assert row["state"] == "FAILING" and "the stored cursor of source 'md'" in row["state_reason"], row
    assert cursors.read_bytes() == before
    fixed = run_cli("cursor", "reset", "md", "--yes", config=cfg)  # the way out works on the bad cursor
    assert fixed.returncode == 0 and "internal error" not in fixed.stderr, fixed.stderr
    assert run_cli("poll", "md", config=cfg).returncode == 0
    assert json.loads(run_cli("status", "--json", config=cfg).stdout)[0]["state"] in ("OK", "IDLE")
