"""Signal, live: ``signal-cli receive`` as a linked device, through a durable spool.

``signal-cli receive`` acknowledges every message it prints: the server never delivers it again. So
its stdout is a file in the source's spool (:mod:`memex.state.spool`, ``<state_dir>/spool/<source>/``),
not a pipe: every byte it prints is on disk even if memex is killed (the child keeps writing into the
file, and the spool delivers it once the child is gone). Each poll:

1. takes back what a killed poll left (files of dead writers, entries of dead claimants);
2. runs ``signal-cli [--config DIR] -a ACCOUNT -o json receive -t SECONDS`` into a spool file, killed
   at the poll's deadline if it hangs (what it printed is kept), then delivers the file durably;
3. claims entries one by one and renders each line (one JSON envelope) into a record
   (:mod:`pollers.signal.render`);
4. removes an entry only when the runner says every record made of it is durable (:meth:`stored`).

The cursor is a counter of spooled lines processed (``{"lines": n}``), only for the poll line: the
spool is the state. The native ID is the author's service ID (ACI) and the sent timestamp in ms,
``<aci>:<timestamp>``, which is how Signal refers to messages in quotes, reactions, edits and deletes.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memex.plugin import NEVER, Batch, Claim, ConfigError, Cursor, Deadline, Entry, Item, SourceConfig, SourceError, Spool
from pollers.signal.groups import GroupNames, parse_list
from pollers.signal.process import STARTUP, Run, run
from pollers.signal.render import EditChains, Renderer

if TYPE_CHECKING:
    from pollers.signal.daemon import Address, Client

LINK_HINT = (
    "install signal-cli (https://github.com/AsamK/signal-cli) and link it as a device: signal-cli link -n memex, then scan the QR code"
)


@dataclass(frozen=True)
class Settings:
    """A signal source's keys, validated."""

    account: str
    executable: str
    config_dir: Path | None
    extra_args: tuple[str, ...]
    receive_timeout: int
    desktop_dir: Path | None = None  # Signal Desktop's folder: `memex backfill` reads its history (pollers.signal.desktop)
    key_cmd: tuple[str, ...] | None = None  # prints the OS key store's password for config.json's "encryptedKey"
    daemon: Address | None = None  # a running signal-cli daemon to receive through (pollers.signal.daemon); None: run receive


def make(source: SourceConfig) -> SignalPoller:
    """Validate ``[sources.NAME]`` of type signal and build its poller (nothing is run yet)."""
    keys = source.keys()
    daemon_text = keys.text("daemon", default=None)
    daemon = None
    if daemon_text is not None:
        from pollers.signal.daemon import parse_address  # sockets and HTTP only for a source that names a daemon

        daemon = parse_address(daemon_text)
    if daemon_text is not None and daemon is None:
        raise keys.error("daemon", f'must be "unix:/path/to/socket", "tcp:HOST:PORT" or "http://HOST:PORT", not {daemon_text!r}')
    account = keys.text("account")
    if not account:
        raise keys.error("account", 'must be the linked account, e.g. "+491701234567"')
    settings = Settings(
        account=account,
        executable=keys.text("executable", default="signal-cli"),
        config_dir=keys.path("config_dir", default=None),
        extra_args=tuple(keys.strings("extra_args", default=[])),
        receive_timeout=keys.number("receive_timeout", default=5, minimum=1, maximum=600),
        desktop_dir=keys.path("desktop_dir", default=None),
        key_cmd=tuple(keys.strings("key_cmd", default=[])) or None,
        daemon=daemon,
    )
    keys.finish()
    if source.state_dir is None:
        raise ConfigError(
            "a signal source needs the config's state_dir (its spool is kept there)", path=source.path, key=f"sources.{source.name}"
        )
    return SignalPoller(source.name, settings, Spool(source.state_dir / "spool" / source.name))


class SignalPoller:
    """One signal-cli account, read through its spool."""

    moves_when_idle = True  # receipts and typing notices move the spool's line count: no message, nothing to store

    def __init__(self, name: str, settings: Settings, spool: Spool) -> None:
        self.name = name
        self.settings = settings
        self.spool = spool
        self.deadline: Deadline = NEVER
        self.receive_state = "not run"
        self._error: SourceError | None = None
        self._warnings: list[str] = []  # logged once as source.warning with the first batch
        self._received = False
        self._claim: Claim | None = None
        self._entry: Entry | None = None
        self._records: deque[bytes] = deque()
        self._done: list[tuple[int, Entry]] = []  # entries read to the end, with the line count at their end
        self.renderer = Renderer(name, settings.config_dir, EditChains(spool.root), GroupNames(spool.root, self._list_groups))

    def use_deadline(self, deadline: Deadline) -> None:
        """The poll's deadline: a receive still running then is killed (what it printed is kept)."""
        self.deadline = deadline

    def validate_cursor(self, cursor: Any) -> str | None:
        """What is wrong with a cursor given by hand or read from the cursor store, or None: ``{"lines": N}``."""
        history = {"sent_at", "id", "part"}
        if not isinstance(cursor, dict) or not (set(cursor) <= {"lines"} or ("sent_at" in cursor and set(cursor) <= history)):
            return 'a Signal cursor is {"lines": N} (spooled lines processed)'
        if any(type(cursor[k]) is not int or cursor[k] < 0 for k in ("lines", "sent_at") if k in cursor):
            return "lines must be a whole number, not negative"
        return None

    def positions(self, cursor: Cursor) -> dict[str, int]:
        """The count of spooled lines processed so far (a history cursor: the sent time in ms it reached)."""
        if cursor and "sent_at" in cursor:
            return {"sent_at": int(cursor["sent_at"])}
        return {"lines": int((cursor or {}).get("lines", 0))}

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """``memex backfill``: Signal Desktop's messages (``desktop_dir``) as the records the live poll makes of them."""
        if self.settings.desktop_dir is None:
            raise ConfigError(  # what to set, not something a retry fixes: exit 2, as for a type that cannot walk its history
                f"source {self.name!r} has no history to walk: set desktop_dir to Signal Desktop's folder "
                "(e.g. ~/.config/Signal, or ~/Library/Application Support/Signal on macOS)",
                key=f"sources.{self.name}.desktop_dir",
            )
        from pollers.signal.desktop import DesktopHistory  # SQLCipher only for a backfill, never for a poll

        return DesktopHistory(self.name, self.settings.desktop_dir, self.settings.key_cmd).walk(since, until, checkpoint)

    def fetch(self, cursor: Cursor, limit: int) -> Batch:
        """Receive into the spool (first call of a poll), then render up to ``limit`` records from claimed entries."""
        if not self._received:
            self._received = True
            self.spool.recover()
            self._receive()
        n = self.positions(cursor)["lines"]
        items: list[Item] = []
        while len(items) < limit:
            if self._entry is None:
                if self._claim is None:
                    self._claim = self.spool.claim()
                self._entry = self._claim.next()
                if self._entry is None:
                    break
                self._records = deque(self._entry.records())
            if self._records:
                raw = self._records.popleft()
                n += 1
                item = self.renderer.render(raw, {"lines": n})
                if item is not None:
                    items.append(item)
            if not self._records:  # read to the end: removable once the cursor covers its last line
                self._done.append((n, self._entry))
                self._entry = None
        if not items and self._entry is None and self._error is not None:
            error, self._error = self._error, None
            raise error
        warnings, self._warnings = self._warnings, []
        return Batch(items=items, cursor={"lines": n}, warnings=warnings)

    def stored(self, cursor: Cursor) -> None:
        """Every record up to ``cursor`` is durable in the store: remove the entries it covers from the spool."""
        upto = self.positions(cursor)["lines"]
        done = [entry for last, entry in self._done if last <= upto]
        if done and self._claim is not None:
            self._claim.remove(done)
        self._done = [(last, entry) for last, entry in self._done if last > upto]

    def report(self) -> dict[str, Any]:
        """Fields for the poll line: the spool's backlog, what was skipped, how the receive went."""
        stats = self.spool.stats()
        fields: dict[str, Any] = {"spool_count": stats.count, "receive": self.receive_state}
        if stats.oldest_age_s is not None:
            fields["spool_oldest_age_s"] = round(stats.oldest_age_s, 1)
        if self.renderer.skipped:
            fields["skipped"] = dict(sorted(self.renderer.skipped.items()))
        return fields

    def close(self) -> None:
        """Save the edit chains; give claimed entries not yet stored back to the spool (the next poll takes them again)."""
        try:
            if self._claim is not None:
                self._claim.release()
                self._claim = None
        finally:
            self.renderer.edits.save()
            self.renderer.groups.save()

    # -- receiving ----------------------------------------------------------------------------------
    def argv(self, *command: str) -> list[str]:
        """A signal-cli command line: ``command`` (by default the receive) after the global options and ``extra_args``."""
        s = self.settings
        config = ["--config", str(s.config_dir)] if s.config_dir is not None else []
        return [
            s.executable,
            *config,
            "-a",
            s.account,
            "-o",
            "json",
            *s.extra_args,
            *(command or ("receive", "-t", str(s.receive_timeout))),
        ]

    def listener(self) -> Any:
        """``memex watch``'s receiver (:class:`pollers.signal.daemon.DaemonListener`) with a daemon; None without one."""
        if self.settings.daemon is None:
            return None
        from pollers.signal.daemon import DaemonListener

        return DaemonListener(self.name, self.settings.daemon, self.settings.account, self.spool, float(self.settings.receive_timeout))

    def _daemon_call(self, method: str, params: dict[str, Any] | None, wait: float) -> tuple[Any, Client]:
        """``method`` on the daemon, within the poll's deadline (cut short by a stop)."""
        from pollers.signal.daemon import Client

        assert self.settings.daemon is not None
        client = Client(self.name, self.settings.daemon, self.settings.account)
        what = f"source {self.name!r}: signal-cli daemon {method}"
        timeout = self.deadline.timeout(wait + STARTUP, what)
        return self.deadline.call(lambda: client.call(method, params, timeout), what, abandon=client.cut), client

    def _list_groups(self) -> dict[str, str] | None:
        """Every group signal-cli knows, by ID (``listGroups``); None when it cannot say (busy, failed: the ID stays the name)."""
        if self.settings.daemon is not None and self.receive_state != "failed":
            try:
                found, _ = self._daemon_call("listGroups", None, self.settings.receive_timeout)
                return parse_list(json.dumps(found).encode())
            except (SourceError, ValueError, KeyError, TypeError) as exc:
                self._warnings.append(f"signal-cli daemon listGroups failed ({exc}): a group new to memex is named by its ID this poll")
                return None
        if self.receive_state in ("busy", "failed"):  # another instance holds the account (listGroups would wait for it
            return None  # too), or signal-cli cannot run: that is reported once, by the receive
        with tempfile.TemporaryFile() as out:
            done = run(self.argv("listGroups"), out.fileno(), self.deadline, STARTUP)
            out.seek(0)
            raw = out.read()
        if done.busy:
            return None
        reason = done.start_error or ("still running, stopped" if done.killed else None) or (f"exit {done.code}" if done.code else None)
        if reason is None:
            try:
                return parse_list(raw)
            except (ValueError, KeyError, TypeError) as exc:
                reason = f"its output is not a list of groups ({type(exc).__name__})"
        self._warnings.append(f"signal-cli listGroups failed ({reason}): a group new to memex is named by its ID this poll")
        return None

    def _receive(self) -> None:
        if self.settings.daemon is not None:
            self._receive_from_daemon()
            return
        writer = self.spool.writer()
        try:
            done = run(self.argv(), writer.fd, self.deadline, self.settings.receive_timeout + STARTUP)
        finally:
            self.spool.deliver(writer)
        if done.start_error is not None:
            self.receive_state = "failed"
            self._error = SourceError(f"cannot run {self.settings.executable!r} ({done.start_error}); {LINK_HINT}")
            return
        self._judge(done)

    def _judge(self, done: Run) -> None:
        code, stderr = done.code, done.stderr
        if done.busy:
            # another instance holds the account (the user's own `signal-cli daemon`, signal-cli-rest-api): normal, and
            # quiet: no warning (it would be cron mail every minute), only `receive: busy` in the (info) poll line
            self.receive_state = "busy"
        elif done.killed:
            self.receive_state = "killed"
            self._warnings.append("signal-cli receive was still running at the poll's time limit: stopped; what it printed is kept")
        elif code == 0:
            self.receive_state = "ok"
        elif re.search(r"not registered|No local data|isn.t registered|not linked", stderr, re.I):
            self.receive_state = "failed"
            self._error = SourceError(f"signal-cli has no linked account {self.settings.account!r}; {LINK_HINT}")
        else:
            self.receive_state = "failed"
            self._error = SourceError(
                f"signal-cli receive failed (exit {code}); run `{' '.join(self.argv())}` by hand to see why (what it printed is kept)"
            )

    def _receive_from_daemon(self) -> None:
        """``receive`` on the daemon, its messages spooled (synced) before anything is rendered; a watcher's listener, if
        one receives for this source, is left to it (the daemon refuses two receives at once)."""
        from pollers.signal.daemon import ALREADY, MAX_MESSAGES, DaemonRefused, listener_pid, mode_warning, spool_messages

        if listener_pid(self.spool) is not None:
            self.receive_state = "listener"
            return

        client: Client | None = None
        got: Any = []
        try:
            got, client = self._daemon_call("receive", {"timeout": self.settings.receive_timeout, "maxMessages": MAX_MESSAGES},
                                            self.settings.receive_timeout)  # fmt: skip
            self.receive_state = "ok"
        except DaemonRefused as exc:
            if ALREADY not in str(exc):
                self.receive_state, self._error = "failed", exc
                return
            self.receive_state = "daemon-mode"
            self._warnings.append(mode_warning(self.name, str(self.settings.daemon)))
        except SourceError as exc:
            self.receive_state, self._error = "failed", exc
            return
        spool_messages(self.spool, (client.pushed if client else []) + (list(got) if isinstance(got, list) else []))
