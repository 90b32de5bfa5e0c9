"""The conformance kit (memex.conformance) against every built-in source and the example plug-in.

Each test builds a small real source (a chat.db, a Maildir, a Dovecot mailbox, Messenger exports, the signal-cli
stand-in, the Graph stand-in, a folder of JSON lines), runs every check of the plug-in contract on it, and then
memex's own poll twice. The kit must also fail: the last tests hand it pollers that break one promise each.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from memex.conformance import Nonconforming, check_poll, check_poller
from memex.records import Message
from memex.registry import make_poller
from memex.source import Batch, Item, Poller
from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, write_config
from tests.email.test_imap import source_table
from tests.email.test_maildir import deliver, mail, make_maildir
from tests.messenger.messenger_fixtures import Export, Thread, msg, write_dir
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server

__all__ = ["dovecot_server"]  # the `dovecot` fixture

EXAMPLE = ROOT / "examples" / "memex-jsonl"


def factory(cfg: memex_config.Config, name: str) -> Callable[[], Poller]:
    """A fresh poller of the configured source, each call."""
    return lambda: make_poller(cfg.source(name))


def test_imessage_conforms(tmp_path: Path) -> None:
    """chat.db (the real schema): every promise holds, including ``head`` for ``start = "now"``."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 8, seed=3)
    cfg = memex_config.load(write_config(tmp_path, {"im": {"type": "imessage", "db": str(db)}}))
    expected = len(_drained_keys(factory(cfg, "im")))
    seeds = itertools.count(100)

    def add(n: int) -> None:
        imessage_samples.append(db, n, seed=next(seeds))  # as Messages.app writes new rows (each seed its own GUIDs)

    ran = check_poller(factory(cfg, "im"), expected=expected, add=add)
    assert ran == ["drain", "resume", "deterministic", "caught-up", "still", "new", "head"]
    fresh = tmp_path / "again"
    fresh.mkdir()
    imessage_samples.build(fresh / "chat.db", 8, seed=3)
    check_poll(memex_config.load(write_config(fresh, {"im": {"type": "imessage", "db": str(fresh / "chat.db")}})), "im", expected=expected)


def test_maildir_conforms_and_a_copy_gives_the_same_records(tmp_path: Path) -> None:
    """A Maildir, and a copy of it elsewhere: the records are the same bytes (they never name the path they came from)."""
    root = make_maildir(tmp_path / "Maildir")
    for n in range(7):
        deliver(root, f"{n}.host", mail(n), sub="cur" if n % 2 else "new")
    shutil.copytree(root, tmp_path / "Copy")
    table = {"type": "maildir", "path": str(root), "settle_seconds": 0}
    cfg = memex_config.load(write_config(tmp_path, {"md": table, "cp": {**table, "path": str(tmp_path / "Copy")}}))
    added = [7]

    def add(n: int) -> None:
        for i in range(added[0], added[0] + n):
            deliver(root, f"{i}.host", mail(i))
        added[0] += n

    copy_cfg = memex_config.load(write_config(tmp_path, {"md": {**table, "path": str(tmp_path / "Copy")}}))
    ran = check_poller(factory(cfg, "md"), expected=7, add=add, copy=factory(copy_cfg, "md"))
    assert {"copy", "new", "head"} <= set(ran)
    check_poll(cfg, "cp", expected=7)


def test_imap_conforms(tmp_path: Path, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real Dovecot mailbox over IMAP."""
    monkeypatch.setenv("MEMEX_TEST_IMAP_PASSWORD", PASSWORD)
    user = dovecot.new_user()
    for n in range(6):
        dovecot.append(user, "INBOX", mail(n))
    table = source_table(dovecot, user, password_env="MEMEX_TEST_IMAP_PASSWORD")
    cfg = memex_config.load(write_config(tmp_path, {"mail": table}))
    added = [6]

    def add(n: int) -> None:
        for i in range(added[0], added[0] + n):
            dovecot.append(user, "INBOX", mail(i))
        added[0] += n

    assert "new" in check_poller(factory(cfg, "mail"), expected=6, add=add)
    check_poll(cfg, "mail", expected=9)  # the 6, the 2 added, and the 1 added after head()


def test_messenger_conforms(tmp_path: Path) -> None:
    """A folder of Messenger exports (a settled standard export)."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    messages = [msg("Anna Berg", 1_700_000_000_000 + i * 1000, f"hello {i}") for i in range(7)]
    write_dir(inbox / "export-1", Export([Thread("anna_1", ["Anna Berg", "Me Myself"], messages)]).files())
    cfg = memex_config.load(write_config(tmp_path, {"fbm": {"type": "messenger", "inbox": str(inbox), "settle_seconds": 0}}))
    check_poller(factory(cfg, "fbm"), expected=7)
    check_poll(cfg, "fbm", expected=7)


def test_the_example_plugin_conforms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/memex-jsonl, the guide's worked example: every promise, a copy of its folder, and memex's own poll."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from memex import registry

    monkeypatch.setitem(registry.BUILTIN, "jsonl", "memex_jsonl:make")
    folder = tmp_path / "logs"
    folder.mkdir()
    write_lines(folder / "2025-01.jsonl", range(5))
    write_lines(folder / "2025-02.jsonl", range(5, 8))
    shutil.copytree(folder, tmp_path / "copy")
    cfg = memex_config.load(write_config(tmp_path, {"j": {"type": "jsonl", "path": str(folder)}}))
    copy_cfg = memex_config.load(write_config(tmp_path / "copy", {"j": {"type": "jsonl", "path": str(tmp_path / "copy")}}))
    added = [8]

    def add(n: int) -> None:
        write_lines(folder / "2025-02.jsonl", range(added[0], added[0] + n), append=True)
        added[0] += n

    ran = check_poller(factory(cfg, "j"), expected=8, add=add, copy=factory(copy_cfg, "j"))
    assert ran == ["drain", "resume", "deterministic", "copy", "caught-up", "still", "new", "head"]
    check_poll(copy_cfg, "j", expected=8)


def write_lines(path: Path, numbers: Iterator[int] | range, *, append: bool = False) -> None:
    """JSON lines for messages ``numbers`` in the example plug-in's format."""
    lines = [json.dumps({"id": f"m-{i}", "at": f"2025-01-01T10:{i % 60:02d}:00Z", "chat": "Family", "from": "Anna", "text": f"line {i}"})
             for i in numbers]  # fmt: skip
    with path.open("a" if append else "w") as f:
        f.write("".join(line + "\n" for line in lines))


def _drained_keys(make: Callable[[], Poller]) -> set[str]:
    """Every key a source holds (for a sample whose record count is its own business)."""
    from memex.conformance import drain

    poller = make()
    try:
        return set(drain(poller).keys)
    finally:
        poller.close()


_READS = itertools.count()  # a record stamped with the time of its read differs from one read to the next


class _Naive:
    """A poller breaking one promise of the contract, chosen by ``flaw``; 6 messages ``{"n": N}``."""

    def __init__(self, flaw: str) -> None:
        self.name = "naive"
        self.flaw = flaw
        self.calls = 0

    def fetch(self, cursor: Any, limit: int) -> Batch:
        self.calls += 1
        after = cursor["n"] if cursor else 0
        if self.flaw == "cursor-moves-when-idle" and after >= 6 and self.calls == 1:  # each poll passes "something" at the end
            return Batch(items=[], cursor={"n": after + 1})
        if self.flaw == "item-cursor-one-behind":  # resuming after an item reads that item again
            items = [Item(cursor={"n": i - 1}, message=self._message(i)) for i in range(after + 1, min(6, after + limit) + 1)]
        elif self.flaw == "item-cursor-one-ahead":  # inside a batch, resuming after an item skips the next one
            last = min(6, after + limit)
            items = [Item(cursor={"n": min(i + 1, last)}, message=self._message(i)) for i in range(after + 1, last + 1)]
        else:
            items = [Item(cursor={"n": i}, message=self._message(i)) for i in range(after + 1, min(6, after + limit) + 1)]
        return Batch(items=items, cursor={"n": min(6, after + len(items))} if items else cursor)

    def _message(self, i: int) -> Message:
        sent = f"2025-01-01T10:00:{next(_READS) % 60:02d}Z" if self.flaw == "record-depends-on-the-read" else "2025-01-01T10:00:00Z"
        return Message(source="naive", type="message", native_id=f"n{i}", sent_at=sent, text=f"m{i}")

    def positions(self, cursor: Any) -> dict[str, int]:
        return {"n": cursor["n"]} if cursor else {}

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("flaw", "check"),
    [
        ("item-cursor-one-behind", "resume"),
        ("item-cursor-one-ahead", "resume"),
        ("record-depends-on-the-read", "deterministic"),
        ("cursor-moves-when-idle", "still"),
    ],
)
def test_the_kit_catches_a_poller_that_breaks_a_promise(flaw: str, check: str) -> None:
    """A naive poller fails the kit with the check it breaks named (the kit itself can fail)."""
    with pytest.raises(Nonconforming, match=rf"^\[{check}\]"):
        check_poller(lambda: _Naive(flaw), expected=6)


def test_a_sound_poller_passes_the_kit() -> None:
    """The same poller without a flaw passes: the failures above are the flaws', not the kit's."""
    assert check_poller(lambda: _Naive("none"), expected=6) == ["drain", "resume", "deterministic", "caught-up", "still"]


class _Misspelt(_Naive):
    """The sound poller with a capability under a misspelt name (and one half of a two-method capability)."""

    def validate_cursr(self, cursor: Any) -> str | None:
        return None if isinstance(cursor, dict) else 'a naive cursor is {"n": N}'

    def inventory(self, cursor: Any) -> Any:  # without reread: verify could list but never repair
        return iter(())


def test_the_kit_reports_a_misspelt_capability_and_half_a_capability() -> None:
    """``validate_cursr`` would silently be a poller without ``validate_cursor``, ``inventory`` without ``reread`` one
    without an inventory: the kit fails on both, naming each, before reading anything; the resolver ignores both."""
    from memex.capabilities import capabilities

    with pytest.raises(Nonconforming, match=r"^\[capabilities\]") as caught:
        check_poller(lambda: _Misspelt("none"), expected=6)
    assert "'validate_cursr' looks like the capability 'validate_cursor'" in str(caught.value)
    assert "Inventoried: inventory without reread" in str(caught.value)
    can = capabilities(_Misspelt("none"))
    assert (can.validate_cursor, can.inventory, can.reread) == (None, None, None)


def test_every_capability_is_one_protocol_resolved_into_the_record() -> None:
    """Each field of :class:`Capabilities` comes from a declared Protocol: a poller with every capability resolves
    every field to its own bound method (or value), a bare poller to none."""
    from memex.capabilities import NAMES, capabilities

    class Everything(_Naive):
        settle_seconds = 2.0
        watch_interval_seconds = 30.0
        whole_revisions = True
        moves_when_idle = True

    for name in sorted(NAMES - {"settle_seconds", "watch_interval_seconds", "whole_revisions", "moves_when_idle"}):
        setattr(Everything, name, lambda self, *a, **k: None)
    full, bare = capabilities(Everything("none")), capabilities(_Naive("none"))
    assert all(getattr(full, n) not in (None, False, 0.0) for n in NAMES)
    assert all(getattr(bare, n) in (None, False, 0.0) for n in NAMES)


def test_signal_conforms(tmp_path: Path) -> None:
    """The live Signal poll over the signal-cli stand-in: what it received waits in the spool until stored."""
    from tests.signal import signal_standin as sc

    folder = tmp_path / "sc"
    table = {"type": "signal", "account": sc.ACCOUNT, "executable": str(sc.install(folder)), "config_dir": str(tmp_path / "scdata"),
             "receive_timeout": 1}  # fmt: skip
    cfg = memex_config.load(write_config(tmp_path, {"sig": table}))
    t0 = 1_744_235_749_734
    sc.queue(folder, *(sc.message(sc.ALICE, t0 + i, f"m{i}") for i in range(5)))
    sent = [5]

    def add(n: int) -> None:
        sc.queue(folder, *(sc.message(sc.ALICE, t0 + i, f"m{i}") for i in range(sent[0], sent[0] + n)))
        sent[0] += n

    assert "new" in check_poller(factory(cfg, "sig"), expected=5, add=add)
    check_poll(cfg, "sig", expected=2)  # the kit released the first 5 from the spool (as stored); the 2 added wait there


def test_teams_conforms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Teams chats through the Graph stand-in, signed in by the device-code flow."""
    from tests.servers.graph import GraphServer
    from tests.teams.test_teams import ADELE, CHAT_A, sign_in
    from tests.teams.test_teams import write_config as teams_config

    with GraphServer(tmp_path) as graph:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(graph.cert))
        graph.add_chat(CHAT_A, topic="Project Falcon", members=[ADELE])
        for i in range(7):
            graph.post(CHAT_A, f"falcon {i}", user=ADELE)
        cfg = memex_config.load(teams_config(tmp_path, graph, page_size=3))
        sign_in(cfg)

        def add(n: int) -> None:
            for i in range(n):
                graph.post(CHAT_A, f"later {i}", user=ADELE)

        assert "new" in check_poller(factory(cfg, "teams"), expected=7, add=add)
        check_poll(cfg, "teams", expected=10)  # the 7, the 2 added, and the 1 added after head()


def make_naive(source: memex_config.SourceConfig) -> _Naive:
    """A plug-in factory for the naive poller (no ``head``)."""
    source.keys().finish()
    return _Naive("none")


def test_start_now_on_a_type_without_head_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plug-in without ``head()`` and ``start = "now"``: one line naming the key, exit 2, never an internal error."""
    from memex import registry
    from memex.runner import poll

    monkeypatch.setitem(registry.BUILTIN, "naive", "tests.core.test_conformance:make_naive")
    cfg = memex_config.load(write_config(tmp_path, {"n": {"type": "naive", "start": "now"}}))
    result = poll(cfg, "n")
    assert (result.status, result.exit_code) == ("error", 2), result.error
    assert result.error is not None and "sources.n.start" in result.error and 'use start = "beginning"' in result.error
