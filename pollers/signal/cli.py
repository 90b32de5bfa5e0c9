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

import os
import re
import signal
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memex.config import SourceConfig
from memex.deadline import NEVER, Deadline
from memex.errors import ConfigError, SourceError, SourceMissing
from memex.source import Batch, Cursor, Item
from memex.state.spool import Claim, Entry, Spool
from pollers.signal.render import EditChains, Renderer

LINK_HINT = (
    "install signal-cli (https://github.com/AsamK/signal-cli) and link it as a device: signal-cli link -n memex, then scan the QR code"
)
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a receive that must end
STARTUP = 30.0  # seconds signal-cli may take to start (a JVM) on top of its receive timeout
# What signal-cli prints on stderr when another instance (a running `signal-cli daemon`) holds the account. It then
# blocks until the lock is free ("INFO  SignalAccount - Config file is in use by another instance, waiting…",
# SignalAccount.openFileChannel with waitForLock); where it does not wait, it exits with the same words.
WAITING = re.compile(rb"Config file is in use by another instance")


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


def make(source: SourceConfig) -> SignalPoller:
    """Validate ``[sources.NAME]`` of type signal and build its poller (nothing is run yet)."""
    keys = source.keys()
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
    )
    keys.finish()
    if source.state_dir is None:
        raise ConfigError(
            "a signal source needs the config's state_dir (its spool is kept there)", path=source.path, key=f"sources.{source.name}"
        )
    return SignalPoller(source.name, settings, Spool(source.state_dir / "spool" / source.name))


class SignalPoller:
    """One signal-cli account, read through its spool."""

    def __init__(self, name: str, settings: Settings, spool: Spool) -> None:
        self.name = name
        self.settings = settings
        self.spool = spool
        self.deadline: Deadline = NEVER
        self.receive_state = "not run"
        self._error: SourceError | None = None
        self._warnings: list[str] = []  # logged once as source.warning with the first batch
        self._received = False
        self._busy = False  # signal-cli said another instance holds the account
        self._claim: Claim | None = None
        self._entry: Entry | None = None
        self._records: deque[bytes] = deque()
        self._done: list[tuple[int, Entry]] = []  # entries read to the end, with the line count at their end
        self.renderer = Renderer(name, settings.config_dir, EditChains(spool.root))

    def use_deadline(self, deadline: Deadline) -> None:
        """The poll's deadline: a receive still running then is killed (what it printed is kept)."""
        self.deadline = deadline

    def positions(self, cursor: Cursor) -> dict[str, int]:
        """The count of spooled lines processed so far (a history cursor: the sent time in ms it reached)."""
        if cursor and "sent_at" in cursor:
            return {"sent_at": int(cursor["sent_at"])}
        return {"lines": int((cursor or {}).get("lines", 0))}

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """``memex backfill``: Signal Desktop's messages (``desktop_dir``) as the records the live poll makes of them."""
        if self.settings.desktop_dir is None:
            raise SourceMissing(
                f"source {self.name!r} has no history to walk: set desktop_dir to Signal Desktop's folder "
                "(e.g. ~/.config/Signal, or ~/Library/Application Support/Signal on macOS)"
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

    # -- receiving ----------------------------------------------------------------------------------
    def argv(self) -> list[str]:
        """The receive command line."""
        s = self.settings
        config = ["--config", str(s.config_dir)] if s.config_dir is not None else []
        return [s.executable, *config, "-a", s.account, "-o", "json", *s.extra_args, "receive", "-t", str(s.receive_timeout)]

    def _receive(self) -> None:
        writer = self.spool.writer()
        try:
            with tempfile.TemporaryFile() as err:
                try:
                    proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=writer.fd, stderr=err, start_new_session=True)
                except OSError as exc:
                    self.receive_state = "failed"
                    self._error = SourceError(f"cannot run {self.settings.executable!r} ({exc.strerror}); {LINK_HINT}")
                    return
                killed = self._wait(proc, writer.fd, err.fileno())
                err.seek(0)
                self._judge(proc.returncode, killed, err.read(1 << 16).decode("utf-8", "replace"))
        finally:
            self.spool.deliver(writer)

    def _wait(self, proc: subprocess.Popen[bytes], out: int, err: int) -> bool:
        """Wait for the receive to end on its own; kill it (and its process group) at the poll's deadline, once it
        printed nothing for ``receive_timeout`` + :data:`STARTUP` seconds (a hang), or as soon as its stderr says it
        waits for another instance's lock (:data:`WAITING`: it would block until that instance ends). True if killed."""
        until = time.monotonic() + self.settings.receive_timeout + STARTUP
        size = 0
        seen = b""  # stderr read so far (its start: the waiting line comes before anything is received)
        while True:
            if (grown := os.fstat(out).st_size) != size:  # still handing messages over: not hung
                size, until = grown, time.monotonic() + self.settings.receive_timeout + STARTUP
            left = min(until - time.monotonic(), self.deadline.remaining())
            if self.deadline.stop.is_set():
                left = 0
            if len(seen) < 1 << 16 and os.fstat(err).st_size > len(seen):
                seen += os.pread(err, (1 << 16) - len(seen), len(seen))
                if WAITING.search(seen):
                    self._busy = True
                    left = 0
            try:
                proc.wait(timeout=max(0.0, min(left, 0.2)))
                return False
            except subprocess.TimeoutExpired:
                if left > 0:
                    continue
            for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return True

    def _judge(self, code: int | None, killed: bool, stderr: str) -> None:
        if self._busy or (not killed and code != 0 and WAITING.search(stderr.encode())):
            # another instance holds the account (the user's own `signal-cli daemon`, signal-cli-rest-api): normal, and
            # quiet: no warning (it would be cron mail every minute), only `receive: busy` in the (info) poll line
            self.receive_state = "busy"
        elif killed:
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
