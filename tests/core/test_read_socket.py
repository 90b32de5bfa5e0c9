"""The read socket (:mod:`memex.read.socket`): while a server runs, ``memex search`` and ``memex show`` in every form
ask it and print the same bytes as without it; the socket is owner-only, a stale one is replaced, a live one is
left alone, and ``memex watch`` serves it for its life."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import memex_thin
from memex import config as memex_config
from memex.cli.find import render_line
from memex.read.archive import Archive
from memex.read.client import ask, socket_path
from memex.read.socket import SocketServer, serve_socket
from tests.conftest import patience, run_cli, wait_until
from tests.core.test_read import polled
from tests.core.test_watch import STORED_WITHIN, started, stop, watching

FORMS = [  # each option of search and show at least once
    ("search", "lease"),
    ("search", "--rank", "--json", "-n", "3", "lease", "OR", "lunch"),
    ("search", "--count", "--output=threads", "*"),
    ("search", "--group-by", "sender", "--json", "*"),
    ("search", "-n", "5", "--group-by=conversation", "*"),
    ("search", "--output", "threads", "lease"),
    ("search", "--", "-lunch", "from:anna"),
    ("search", "with:nobody-at-all", "lease"),  # a with: naming nobody: its note on stderr
    ("show", "--json", "lunch@example.net"),
    ("show", "--thread", "lease2@example.com"),
]
OFF = {"MEMEX_NO_SERVER": "1"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A polled archive (:func:`tests.core.test_read.polled`) of 30 chat messages and the search tests' mails."""
    return polled(tmp_path_factory.mktemp("sock"), 30)


def _serve(cfg: Path) -> SocketServer:
    loaded = memex_config.load(cfg)
    return serve_socket(Archive(loaded, follow_people=True), loaded.state_dir, render_line)


def test_every_form_prints_the_same_bytes_through_the_server_as_without(archive: Path) -> None:
    """Each form of `memex search` (-n, --json, --rank, --count, --group-by, --output=threads, --) and `memex show`
    (--json, --thread) prints the same stdout, stderr and exit status answered by the server as in-process; the
    server answered each one (its count of answers); a bad query is still the parser's one line, exit 2."""
    expected = [run_cli(*form, config=archive, env=OFF) for form in FORMS]
    assert all(e.returncode == 0 and (e.stdout or "names no person" in e.stderr) for e in expected), [e.stderr for e in expected]
    with _serve(archive) as server:
        assert server.serving
        got = [run_cli(*form, config=archive) for form in FORMS]
        answered, rendered = server.answered, server.rendered
        bad = run_cli("search", "(lease", config=archive)
    for form, e, g in zip(FORMS, expected, got, strict=True):
        assert (g.returncode, g.stdout, g.stderr) == (e.returncode, e.stdout, e.stderr), form
    assert answered == rendered == len(FORMS)  # each by the thin client (memex_thin: python -m memex runs it first)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_the_socket_is_owner_only_and_a_live_one_is_left_alone(archive: Path) -> None:
    """The socket is 0600 in a 0700 folder; a second server beside a live one does not serve and does not remove
    it; closing the first removes the socket."""
    state = memex_config.load(archive).state_dir
    path = Path(socket_path(state))
    with _serve(archive) as first:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        second = _serve(archive)
        assert first.serving and not second.serving
        second.close()
        assert path.exists() and ask(state, archive, "count", query="lease", conversations=False) == 2
    assert not path.exists()


def test_a_stale_socket_is_answered_in_process_and_replaced(archive: Path) -> None:
    """A socket left by a server that died (nobody listens): the commands answer in-process, the same bytes; the
    next server replaces it and answers; a config file changed since the server read it is answered in-process."""
    state = memex_config.load(archive).state_dir
    path = socket_path(state)
    Path(path).parent.mkdir(mode=0o700, exist_ok=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)
    dead.close()  # the file stays, nobody accepts
    expected = run_cli("search", "--json", "lease", config=archive, env=OFF)
    stale = run_cli("search", "--json", "lease", config=archive)
    assert (stale.returncode, stale.stdout) == (0, expected.stdout)
    with _serve(archive) as server:
        assert server.serving and run_cli("search", "--json", "lease", config=archive).stdout == expected.stdout
        assert server.answered == 1
        os.utime(archive, ns=(1, 1))  # the config "changed": the server's answer is not asked for
        assert ask(state, archive, "count", query="lease", conversations=False) is None
        assert run_cli("search", "--json", "lease", config=archive).stdout == expected.stdout
        assert server.answered == 1


def test_memex_watch_serves_the_socket_while_it_runs(archive: Path) -> None:
    """`memex watch` listens on the read socket once it runs: a search is answered through it (the same bytes),
    and the socket is gone after it stops."""
    state = memex_config.load(archive).state_dir
    expected = run_cli("search", "lease", config=archive, env=OFF)
    with watching(archive, "md") as proc:
        started(state, "md")
        wait_until(lambda: ask(state, archive, "count", query="lease", conversations=False) == 2, STORED_WITHIN,
                   "the watch's read socket answering")  # fmt: skip
        assert run_cli("search", "lease", config=archive).stdout == expected.stdout
        stop(proc)
    assert not Path(socket_path(state)).exists()


def test_the_new_fast_forms_say_what_click_says_and_import_no_click(archive: Path) -> None:
    """--count, --group-by, --output=threads, a query after -- and show --thread, now parsed without click: the same
    bytes and exit code as through click (--debug); a search after -- and a count import neither click nor rich."""
    for form in [f for f in FORMS if set(f) & {"--count", "--group-by", "--group-by=conversation", "--output", "--", "--thread"}]:
        plain, via_click = run_cli(*form, config=archive, env=OFF), run_cli("--debug", *form, config=archive, env=OFF)
        assert (plain.returncode, plain.stdout, plain.stderr) == (via_click.returncode, via_click.stdout, via_click.stderr), form
    for form in (("search", "--", "-lunch", "lease"), ("search", "--count", "--output=threads", "*")):
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "memex", "--config", str(archive), *form],
                             capture_output=True, text=True, timeout=patience(60), env={**os.environ, **OFF})  # fmt: skip
        assert out.returncode == 0 and out.stdout, out.stderr[-500:]
        imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
        assert not imported & {"click", "rich"}, form


THIN = "import sys, memex_thin; sys.argv[0] = 'memex'; memex_thin.main()"  # the console script's lines


def _thin(*args: str, config: Path, env: dict[str, str] | None = None, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``memex ARGS`` as the console script does (:mod:`memex_thin` first, never ``import memex`` before it)."""
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", THIN, "--config", str(config), *args]
    full = {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"} | (env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=patience(60), env=full)


def test_the_thin_client_imports_no_config_no_parser_and_not_memex(archive: Path) -> None:
    """Answered by the server, a search and a show through the console script's first lines import neither the
    memex package nor its config (tomllib) nor the query parser; the bytes are those printed in-process."""
    with _serve(archive) as server:
        for form in (("search", "-n", "3", "--json", "lease"), ("show", "lunch@example.net")):
            got = _thin(*form, config=archive, importtime=True)
            imported = {line.split("|")[-1].strip() for line in got.stderr.splitlines() if "|" in line}
            assert got.returncode == 0 and got.stdout == run_cli(*form, config=archive, env=OFF).stdout, form
            assert "memex_thin" in imported and not imported & {"memex", "memex.config", "tomllib", "memex.search.parse"}, form
        assert server.rendered == 2


def test_the_thin_client_falls_back_on_a_stale_beacon_or_a_changed_config(archive: Path) -> None:
    """A beacon whose server died (its socket gone), a config file changed since the server read it, a bad query,
    another TZ than the server's, a terminal on stdout and a runtime folder others may write: the same bytes and
    exit code as in-process, none rendered by the server."""
    form = ("search", "--json", "lease")
    expected = run_cli(*form, config=archive, env=OFF)
    with _serve(archive) as server:
        beacon = server.beacon
        assert beacon is not None and _thin(*form, config=archive).stdout == expected.stdout and server.rendered == 1
        bad = (_thin("search", "(lease", config=archive), run_cli("search", "(lease", config=archive, env=OFF))
        assert (bad[0].returncode, bad[0].stderr) == (bad[1].returncode, bad[1].stderr) == (2, bad[1].stderr)
        other_tz = _thin(*form, config=archive, env={"TZ": "Pacific/Chatham"})  # a fact the server's run does not share
        assert (other_tz.returncode, other_tz.stdout) == (0, expected.stdout) and server.rendered == 1
        main, tty = os.openpty()  # a terminal's coloured lines are left to the in-process path
        cmd = [sys.executable, "-c", THIN, "--config", str(archive), "search", "lease"]
        subprocess.run(cmd, stdout=tty, stderr=subprocess.DEVNULL, timeout=patience(60), env={**os.environ, "COLUMNS": "200"})
        os.close(tty)
        os.close(main)
        assert server.rendered == 1
        os.utime(archive, ns=(2, 2))  # the config "changed" since the server read it
        changed = _thin(*form, config=archive)
        assert (changed.returncode, changed.stdout, changed.stderr) == (expected.returncode, expected.stdout, expected.stderr)
        assert server.rendered == 1
        stale = Path(beacon).read_text()
    Path(beacon).write_text(stale)  # left by a server that died: its socket is gone
    got = _thin(*form, config=archive)
    assert (got.returncode, got.stdout, got.stderr) == (expected.returncode, expected.stdout, expected.stderr)
    Path(beacon).unlink()
    folder = Path(memex_thin.runtime_dir(os.environ))
    assert memex_thin.private(str(folder)) and not memex_thin.private(str(folder.parent))


@pytest.mark.parametrize("explicit", [None, "~/memex.toml", "rel/config.toml", "/abs/c.toml"])
@pytest.mark.parametrize("env", [{}, {"MEMEX_CONFIG": "~/env.toml"}, {"XDG_CONFIG_HOME": "/xdg"}, {"HOME": "/h"}])
def test_the_thin_client_finds_the_config_as_memex_does(monkeypatch: pytest.MonkeyPatch, explicit: str | None, env: dict[str, str]) -> None:
    """memex_thin.config_path is memex.config.find_config's rule (--config, $MEMEX_CONFIG, the user config folder),
    made absolute: the beacon it reads is the one the server reading that file wrote."""
    monkeypatch.delenv("MEMEX_CONFIG", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert memex_thin.config_path(explicit, os.environ) == os.path.abspath(memex_config.find_config(explicit))
