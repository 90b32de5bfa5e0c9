"""Signal, live: ``signal-cli receive`` as a linked device, through a durable spool.

``signal-cli receive`` acknowledges every message it prints: the server never delivers it again. So
its stdout is a file in the source's spool (:mod:`memex.state.spool`, ``<state_dir>/spool/<source>/``),
not a pipe: every byte it prints is on disk even if memex is killed (the child keeps writing into the
file, and the spool delivers it once the child is gone). Each poll:

1. takes back what a killed poll left (files of dead writers, entries of dead claimants);
2. runs ``signal-cli [--config DIR] -a ACCOUNT -o json receive -t SECONDS`` into a spool file, killed
   at the poll's deadline if it hangs (what it printed is kept), then delivers the file durably;
3. claims entries one by one and renders each line (one JSON envelope, field names from signal-cli's
   ``JsonMessageEnvelope`` and neighbours) into a record;
4. removes an entry only when the runner says every record made of it is durable (:meth:`stored`).

The cursor is a counter of spooled lines processed (``{"lines": n}``), only for the poll line: the
spool is the state. The native ID is the author's service ID (ACI) and the sent timestamp in ms,
``<aci>:<timestamp>``, which is how Signal refers to messages in quotes, reactions, edits and deletes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from memex.config import SourceConfig
from memex.deadline import NEVER, Deadline
from memex.errors import ConfigError, SourceError, SourceMissing
from memex.records import Attachment, Conversation, Message, Sender
from memex.source import Batch, Cursor, Failure, Item
from memex.state.files import atomic_replace, ensure_private_dir
from memex.state.spool import Claim, Entry, Spool
from memex.store.attachments import Content
from pollers.signal_records import delete_revision, edit_revision, native_id, reaction_revision, sent_time

LINK_HINT = (
    "install signal-cli (https://github.com/AsamK/signal-cli) and link it as a device: signal-cli link -n memex, then scan the QR code"
)
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a receive that must end
STARTUP = 30.0  # seconds signal-cli may take to start (a JVM) on top of its receive timeout
EDITS = "edits.json"
MAX_EDITS = 20000  # edit chains remembered (newest kept)
SKIPPED_KINDS = ("receiptMessage", "typingMessage", "callMessage", "storyMessage")


@dataclass(frozen=True)
class Settings:
    """A signal source's keys, validated."""

    account: str
    executable: str
    config_dir: Path | None
    extra_args: tuple[str, ...]
    receive_timeout: int
    desktop_dir: Path | None = None  # Signal Desktop's folder: `memex backfill` reads its history (pollers.signal_desktop)
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


def data_dir(settings: Settings) -> Path:
    """signal-cli's data folder (``--config``; by default ``$XDG_DATA_HOME/signal-cli``), where it keeps attachments."""
    if settings.config_dir is not None:
        return settings.config_dir
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "signal-cli"


class SignalPoller:
    """One signal-cli account, read through its spool."""

    def __init__(self, name: str, settings: Settings, spool: Spool) -> None:
        self.name = name
        self.settings = settings
        self.spool = spool
        self.deadline: Deadline = NEVER
        self.skipped: Counter[str] = Counter()
        self.receive_state = "not run"
        self._error: SourceError | None = None
        self._warnings: list[str] = []  # logged once as source.warning with the first batch
        self._received = False
        self._claim: Claim | None = None
        self._entry: Entry | None = None
        self._records: deque[bytes] = deque()
        self._done: list[tuple[int, Entry]] = []  # entries read to the end, with the line count at their end
        self._edits: dict[str, str] | None = None  # an edit's own ID -> the original it revises (edits chain)
        self._edits_changed = False

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
        from pollers.signal_desktop import DesktopHistory  # SQLCipher only for a backfill, never for a poll

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
                item = self.render(raw, {"lines": n})
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
        if self.skipped:
            fields["skipped"] = dict(sorted(self.skipped.items()))
        return fields

    def original_of(self, target: str, edit: str) -> str:
        """The message an edit revises. Signal chains edits: a second edit targets the first edit's timestamp,
        so each edit's own ID is remembered (``<spool>/edits.json``) and resolved back to the original."""
        if self._edits is None:
            try:
                loaded = json.loads((self.spool.root / EDITS).read_bytes())
                self._edits = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self._edits = {}
        original = self._edits.get(target, target)
        if self._edits.get(edit) != original:
            self._edits[edit] = original
            self._edits_changed = True
        return original

    def close(self) -> None:
        """Save the edit chains; give claimed entries not yet stored back to the spool (the next poll takes them again)."""
        try:
            if self._claim is not None:
                self._claim.release()
                self._claim = None
        finally:
            if self._edits is not None and self._edits_changed:
                keep = dict(list(self._edits.items())[-MAX_EDITS:])
                ensure_private_dir(self.spool.root)
                atomic_replace(self.spool.root / EDITS, json.dumps(keep).encode())
                self._edits_changed = False

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
                killed = self._wait(proc, writer.fd)
                err.seek(0)
                self._judge(proc.returncode, killed, err.read(1 << 16).decode("utf-8", "replace"))
        finally:
            self.spool.deliver(writer)

    def _wait(self, proc: subprocess.Popen[bytes], out: int) -> bool:
        """Wait for the receive to end on its own; kill it (and its process group) at the poll's deadline, or once it
        printed nothing for ``receive_timeout`` + :data:`STARTUP` seconds (a hang). True if killed."""
        until = time.monotonic() + self.settings.receive_timeout + STARTUP
        size = 0
        while True:
            if (grown := os.fstat(out).st_size) != size:  # still handing messages over: not hung
                size, until = grown, time.monotonic() + self.settings.receive_timeout + STARTUP
            left = min(until - time.monotonic(), self.deadline.remaining())
            if self.deadline.stop.is_set():
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
        if killed:
            self.receive_state = "killed"
            self._warnings.append("signal-cli receive was still running at the poll's time limit: stopped; what it printed is kept")
        elif code == 0:
            self.receive_state = "ok"
        elif "in use by another instance" in stderr:
            self.receive_state = "busy"  # e.g. the user's own signal-cli daemon: not a memex failure
            self._warnings.append(
                "another signal-cli instance holds this account (e.g. your signal-cli daemon): no receive this poll, "
                "the spool was still stored; stop the other instance or let it be"
            )
        elif re.search(r"not registered|No local data|isn.t registered|not linked", stderr, re.I):
            self.receive_state = "failed"
            self._error = SourceError(f"signal-cli has no linked account {self.settings.account!r}; {LINK_HINT}")
        else:
            self.receive_state = "failed"
            self._error = SourceError(
                f"signal-cli receive failed (exit {code}); run `{' '.join(self.argv())}` by hand to see why (what it printed is kept)"
            )

    # -- rendering ----------------------------------------------------------------------------------
    def render(self, raw: bytes, cursor: Cursor) -> Item | None:
        """One line of signal-cli's JSON output as an item (None: not a message, counted in ``skipped``)."""
        if not raw.strip():
            return None
        ref = f"line {cursor['lines']}"
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise ValueError("not an object")
        except ValueError:
            return Item(cursor, failure=Failure(_line_id(raw), "a line from signal-cli is not a JSON object", raw=raw, ref=ref))
        try:
            return self._render(doc, raw, cursor, ref)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            return Item(cursor, failure=Failure(_line_id(raw), f"malformed envelope ({type(exc).__name__})", raw=raw, ref=ref))

    def _render(self, doc: dict[str, Any], raw: bytes, cursor: Cursor, ref: str) -> Item | None:
        env = doc.get("envelope") or {}
        if "exception" in doc:
            kind = str((doc.get("exception") or {}).get("type") or "unknown")
            return Item(cursor, failure=Failure(_line_id(raw), f"signal-cli could not read this envelope ({kind})", raw=raw, ref=ref))
        author = env.get("sourceUuid")
        for key in SKIPPED_KINDS:
            if env.get(key) is not None:
                self.skipped[key.removesuffix("Message")] += 1
                return None
        if env.get("editMessage") is not None:
            return self._data(env, author, env["editMessage"]["dataMessage"], cursor, edit_of=env["editMessage"]["targetSentTimestamp"])
        if env.get("dataMessage") is not None:
            return self._data(env, author, env["dataMessage"], cursor)
        sync = env.get("syncMessage")
        if sync is not None and sync.get("sentMessage") is not None:
            sent = sync["sentMessage"]
            if sent.get("editMessage") is not None:
                edit = sent["editMessage"]
                return self._data(env, author, edit["dataMessage"], cursor, edit_of=edit["targetSentTimestamp"], sent=sent)
            return self._data(env, author, sent, cursor, sent=sent)
        self.skipped["sync" if sync is not None else "other"] += 1
        return None

    def _data(
        self,
        env: dict[str, Any],
        author: Any,
        data: dict[str, Any],
        cursor: Cursor,
        *,
        edit_of: Any = None,
        sent: dict[str, Any] | None = None,
    ) -> Item | None:
        if not isinstance(author, str) or not author:
            raise ValueError("no sender service ID")
        ts = int(data["timestamp"])
        group = data.get("groupInfo") or {}
        if group.get("type") == "UPDATE" and not data.get("message") and not data.get("attachments"):
            self.skipped["group_update"] += 1
            return None
        if data.get("isExpirationUpdate"):
            self.skipped["expiration_update"] += 1
            return None
        is_me = sent is not None
        peer = (sent or {}).get("destinationUuid") if is_me else author
        conversation = Conversation(
            id=group.get("groupId") or peer,
            name=group.get("groupName") or (None if is_me else env.get("sourceName")),
            participants=[p for p in (peer,) if p] if not group else [],
        )
        sender = Sender(id=author, name=env.get("sourceName"), is_me=is_me)
        at = sent_time(ts)

        def record(nid: str, **kw: Any) -> Message:
            return Message(source=self.name, type="signal", native_id=nid, sent_at=at, conversation=conversation, sender=sender, **kw)

        reaction, delete = data.get("reaction"), data.get("remoteDelete")
        if reaction is not None:
            target = native_id(reaction["targetAuthorUuid"], reaction["targetSentTimestamp"])
            rev = reaction_revision(author, ts)
            how = {"emoji": reaction.get("emoji"), "by": author, "remove": bool(reaction.get("isRemove"))}
            return Item(cursor, message=record(target, revision=rev, extra={"reaction": how}))
        if delete is not None:
            return Item(cursor, message=record(native_id(author, delete["timestamp"]), revision=delete_revision(ts), deleted=True))
        attachments, contents = self._attachments(data.get("attachments") or [])
        quote = data.get("quote")
        extra: dict[str, Any] = {}
        for key in ("mentions", "sticker", "previews", "contacts", "pollCreate", "textStyles"):
            if data.get(key):
                extra[key] = data[key]
        if data.get("expiresInSeconds"):
            extra["expires_in_s"] = data["expiresInSeconds"]
        if data.get("viewOnce"):
            extra["view_once"] = True
        own = native_id(author, ts)
        message = record(
            own if edit_of is None else self.original_of(native_id(author, edit_of), own),
            text=data.get("message"),
            attachments=attachments,
            reply_to=native_id(quote["authorUuid"], quote["id"]) if quote and quote.get("authorUuid") else None,
            extra=extra,
        )
        if edit_of is not None:
            message.revision = edit_revision(ts)
            message.edited_at = at
        return Item(cursor, message=message, contents=contents)

    def _attachments(self, listed: list[dict[str, Any]]) -> tuple[list[Attachment], list[Content]]:
        attachments: list[Attachment] = []
        contents: list[Content] = []
        folder = data_dir(self.settings) / "attachments"
        for i, a in enumerate(listed):
            att = Attachment(id=str(a.get("id")), filename=a.get("filename"), mime_type=a.get("contentType"), size=a.get("size"))
            attachments.append(att)
            if a.get("id"):
                path = folder / re.sub(r"[^A-Za-z0-9_.-]", "_", str(a["id"]))
                contents.append(Content(index=i, open=_opener(path)))
            else:
                att["missing"] = True
        return attachments, contents


def _opener(path: Path) -> Callable[[], IO[bytes]]:
    def open_it() -> IO[bytes]:
        return open(path, "rb")

    return open_it


def _line_id(raw: bytes) -> str:
    return "line:" + hashlib.sha256(raw).hexdigest()[:32]
