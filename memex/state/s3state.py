"""Cursors and run leases on S3, so that several hosts share one index and one set of cursors.

With ``state_url = "s3://bucket/prefix"`` in the config, the local state dir keeps only logs, metrics and
spools; what must be shared lives under the prefix:

- ``cursors/<source>.json``: one object per source holding the same section ``cursors.json`` holds locally.
  One object per source, not one shared object: sources never contend with each other (a poll's write only
  retries against writers of its own source: a backfill or a ``memex cursor set``), a corrupt object stops
  one source only, and the fencing epoch is per source anyway. Reading every cursor costs one GET per source,
  which only ``status``, ``cursor show`` and the dashboard do.
- ``leases/<source>.json`` (``<source>.backfill.json`` for backfills): the run lock, as a lease.

Every change is a compare-and-swap (:mod:`memex.s3.cas`): read the object and its ETag, change only this
source's section, write back with ``If-Match`` (create with ``If-None-Match: *``), and on 412/409 re-read and
try again with jittered backoff. Each write carries a random ``write_id``; a retry whose first response was
lost (the write landed, the retry met 412) recognises its own write on the re-read instead of failing or
applying the change twice. A corrupt object stops the poll and is never overwritten.

Leases and fencing. A lease object holds its owner (host, pid), an ``epoch`` and its ``ttl``. It is created with
``If-None-Match: *``, renewed while the poll runs (every ttl/3, ``If-Match``), released at the end, and an
expired or released lease is taken over with ``If-Match`` on its ETag and epoch + 1. Every cursor write made
under a lease carries its epoch, and a write whose epoch is older than the one stored in the section is
refused (:class:`~memex.errors.LeaseLost`): a holder paused past its TTL (a laptop asleep mid-poll, a stopped
VM) can never move the cursor after another host took over. Its messages are create-only objects, so the
refusal loses nothing.

Requests. A poll with nothing new costs four: the lease PUT, one GET of the cursor object (which is both the
epoch floor and the poll's cursor), the claim PUT and the release PUT. The lease GET is skipped when this host
released the lease last: the release's ETag and epoch are kept beside the local lock file
(``<state_dir>/locks/<source>.poll.lease.json``) and the next acquire writes with ``If-Match`` on that ETag, which
succeeds only if nobody wrote the lease since (a 412 falls back to reading it: two requests more). A cursor write remembers what it wrote, so the next write of the
same store tries ``If-Match`` on it without a GET first (a stale one meets 412 and reads).

Logs. The lease's events go to the poll's (or backfill's) source log: ``lease.taken_over`` is info after a clean
release and a warning naming the holder that did not release; ``lease.lost`` is an error.

Clocks. Expiry is judged on the S3 server's clock alone: the lease object's ``Last-Modified`` against the
``Date`` of the response that read it. No host's wall clock enters any decision, so hosts may disagree by any
amount (they must stay within S3's 15-minute request-signing window to talk to AWS at all). The design assumes
only that the server's clock runs at a sane rate, and a 1-second allowance covers the headers' granularity.
"""

from __future__ import annotations

import copy
import json
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memex.config import Config
from memex.errors import AlreadyRunning, ConfigError, LeaseLost, StateError
from memex.s3.bucket import S3Bucket
from memex.s3.cas import Versioned, get_versioned, put_if
from memex.state.cursors import FORMAT, CursorEdits, Section, utc_now
from memex.state.files import write_temp

CAS_ATTEMPTS = 12
GRANULARITY_S = 1.0  # Last-Modified and Date have whole seconds


def host_name() -> str:
    """This host's name in leases and cursor writes: ``$MEMEX_HOST``, else the system's host name."""
    return os.environ.get("MEMEX_HOST") or socket.gethostname()


def owner() -> dict[str, Any]:
    """This process as a lease owner and cursor writer."""
    return {"host": host_name(), "pid": os.getpid()}


def open_state(cfg: Config) -> S3Bucket:
    """The S3 client for ``cfg.state_url`` (connection settings from ``[store]``); no I/O yet."""
    url = cfg.state_url or ""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ConfigError("state_url must be s3://bucket/prefix", path=cfg.path, key="state_url")
    s = cfg.store
    return S3Bucket(parts.netloc, parts.path, endpoint_url=s.endpoint_url, region=s.region, profile=s.profile, client=s.client,
                   max_pool_connections=2)  # fmt: skip


def _backoff(attempt: int, base: float) -> None:
    time.sleep(random.random() * min(base * 2**attempt, 2.0))


class S3CursorStore(CursorEdits):
    """The per-source cursor sections on S3, with the interface of :class:`memex.state.cursors.CursorStore`.

    ``epoch`` is the fencing token of the lease this store writes under (None: a write by hand or by a tool
    that holds no lease; it keeps the stored epoch).
    """

    def __init__(self, state: S3Bucket, *, sources: Iterable[str] = (), epoch: int | None = None, retry_delay: float = 0.05) -> None:
        self.state = state
        self.sources = list(sources)
        self.epoch = epoch
        self.retry_delay = retry_delay
        self.path = state.url  # for messages: where the state lives
        self._primed: dict[str, tuple[Section, Versioned | None]] = {}  # handed over (by a lease): the next read or write uses it
        self._written: dict[str, tuple[Section, Versioned | None]] = {}  # what this store last wrote: the next write tries it first

    def key(self, source: str) -> str:
        """The object key of one source's section."""
        return f"cursors/{source}.json"

    def where(self, source: str) -> str:
        """The full URL of one source's section (for messages)."""
        return f"{self.state.url}/{self.key(source)}"

    def written(self, source: str) -> tuple[Section, Versioned | None] | None:
        """What this store last wrote of ``source``'s section and its version (to hand to another store), or None."""
        return self._written.get(source)

    def prime(self, source: str, known: tuple[Section, Versioned | None] | None) -> None:
        """Let the next read or write of ``source`` use ``known`` (a section and its version, just read or written), not a GET.

        A write from there is still a compare-and-swap on its ETag: if the object changed since, it meets 412 and reads.
        """
        if known is not None:
            self._primed[source] = known

    # -- reading -----------------------------------------------------------
    def _read(self, source: str) -> tuple[Section, Versioned | None]:
        primed = self._primed.pop(source, None)
        if primed is not None:
            return copy.deepcopy(primed[0]), primed[1]
        got = get_versioned(self.state, self.key(source))
        if got is None:
            return {}, None
        return _parse(got.body, self.where(source), source), got

    def load(self) -> dict[str, Section]:
        """Every configured source's section (one GET each; a source with no object is left out)."""
        out = {}
        for name in self.sources:
            section, got = self._read(name)
            if got is not None:
                out[name] = section
        return out

    def section(self, source: str) -> Section:
        """Return one source's section (empty if it has none yet)."""
        return self._read(source)[0]

    def cursor(self, source: str) -> Any:
        """Return the live cursor of ``source``, or None before its first poll."""
        return self.section(source).get("cursor")

    # -- changing ----------------------------------------------------------
    def update(self, source: str, change: Callable[[Section], Section]) -> Section:
        """Apply ``change`` to ``source``'s section with compare-and-swap, fenced by this store's epoch."""
        write_id = uuid.uuid4().hex
        for attempt in range(CAS_ATTEMPTS):
            remembered = self._written.pop(source, None) if source not in self._primed else self._primed.pop(source)
            if remembered is not None:
                before, got = copy.deepcopy(remembered[0]), remembered[1]
            else:
                before, got = self._read(source)
            if attempt and before.get("write_id") == write_id:
                return before  # our earlier attempt landed; its response was lost
            stored_epoch = before.get("epoch")
            if self.epoch is not None and isinstance(stored_epoch, int) and stored_epoch > self.epoch:
                holder = before.get("written_by") or {}
                raise LeaseLost(
                    f"{self.where(source)}: not saving the cursor: this poll's lease (epoch {self.epoch}) was taken over by "
                    f"{holder.get('host', '?')} pid {holder.get('pid', '?')} (epoch {stored_epoch}) while it ran; "
                    "its messages are stored and the new holder goes on from its own cursor"
                )
            after = change(copy.deepcopy(before))
            if after == before:
                if remembered is not None:
                    continue  # judged on a remembered copy: read the object itself before deciding nothing changes
                return after
            if self.epoch is not None:
                after["epoch"] = self.epoch
            after["write_id"] = write_id
            after["written_by"] = {**owner(), "at": utc_now()}
            doc = {"format": FORMAT, "source": source, "section": after}
            data = json.dumps(doc, sort_keys=True, ensure_ascii=False).encode() + b"\n"
            etag = put_if(self.state, self.key(source), data, etag=got.etag if got else None)
            if etag is not None:
                self._written[source] = (copy.deepcopy(after), Versioned(data, etag, 0.0, 0.0))
                return after
            if remembered is None:  # a remembered copy that was stale: read at once, no one is racing us
                _backoff(attempt, self.retry_delay)
        raise StateError(f"could not save after {CAS_ATTEMPTS} tries: other writers keep changing it; try again", path=self.where(source))

    def claim(self, source: str) -> None:
        """Write this store's epoch into the section at once: from now on an older holder's write is refused.

        Called right after a lease is taken, before anything is read from the source; without it a paused
        holder could still save its cursor until the new holder's first save.
        """
        epoch = self.epoch

        def change(section: Section) -> Section:
            section["epoch"] = epoch
            return section

        self.update(source, change)


def _parse(raw: bytes, where: str, source: str) -> Section:
    """Validate one section object, or raise StateError (and never overwrite it)."""
    hint = "restore it from a backup or move it aside; memex will not overwrite it"
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateError(f"corrupt cursor object ({exc.__class__.__name__}); {hint}", path=where) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("section"), dict) or doc.get("source") != source:
        raise StateError(f"not a memex cursor object for {source!r}; {hint}", path=where)
    if doc.get("format") != FORMAT:
        raise StateError(f"unknown cursors format {doc.get('format')!r} (this memex reads {FORMAT}); upgrade memex", path=where)
    section: Section = doc["section"]
    return section


@dataclass
class LeaseInfo:
    """What a lease object says, for status and messages."""

    host: str | None
    pid: int | None
    epoch: int
    released: bool
    age: float
    ttl: float

    @property
    def live(self) -> bool:
        """Held and not expired (by the server's clock)."""
        return not self.released and self.age < self.ttl + GRANULARITY_S


def read_lease(state: S3Bucket, key: str) -> tuple[LeaseInfo, Versioned] | None:
    """The lease at ``key`` (None if there is none); a corrupt lease raises StateError."""
    got = get_versioned(state, key)
    if got is None:
        return None
    try:
        doc = json.loads(got.body)
        info = LeaseInfo(
            host=doc.get("host"),
            pid=doc.get("pid"),
            epoch=int(doc["epoch"]),
            released=bool(doc.get("released")),
            age=got.age,
            ttl=float(doc["ttl"]),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        raise StateError("corrupt lease object; delete it once no memex runs for this source", path=f"{state.url}/{key}") from None
    return info, got


class S3Lease:
    """A run lease on S3 with the interface of :class:`memex.state.locks.RunLock`, plus the fencing ``epoch``.

    ``log``: the source logger its events go to (None: not logged). ``memo``: a local file where the release's
    ETag and epoch are kept, so that this host's next acquire skips the lease GET (None: always read it).
    """

    def __init__(self, state: S3Bucket, name: str, *, ttl: float, fenced_source: str | None = None, log: Any = None,
                 memo: Path | None = None) -> None:  # fmt: skip
        self.state = state
        self.key = f"leases/{name}.json"
        self.path = f"{state.url}/{self.key}"
        self.ttl = ttl
        self.fenced_source = fenced_source  # the source whose cursor writes carry this lease's epoch
        self.log = log
        self.memo = memo
        self.epoch: int | None = None
        self.lost = threading.Event()
        self.claimed: tuple[Section, Versioned | None] | None = None  # the fenced section as the claim wrote it
        self._etag: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._memo_pid: int | None = None

    def _doc(self, **extra: Any) -> bytes:
        return json.dumps({**owner(), "epoch": self.epoch, "ttl": self.ttl, "acquired_at": utc_now(), **extra}).encode()

    def acquire(self) -> None:
        """Take the lease now or raise :class:`AlreadyRunning` naming the holder."""
        cursors = S3CursorStore(self.state)
        previous: LeaseInfo | None = None
        etag = self._take_remembered()
        if etag is not None:  # we released it last and nobody wrote it since
            previous = LeaseInfo(host=host_name(), pid=self._memo_pid, epoch=(self.epoch or 1) - 1, released=True, age=0.0, ttl=self.ttl)
            floor = self._floor(cursors)
            if floor >= (self.epoch or 0):  # a cursor fenced above the lease (a lease deleted by hand): go above it
                self.epoch = floor + 1
                etag = put_if(self.state, self.key, self._doc(), etag=etag)
                if etag is None:
                    again = read_lease(self.state, self.key)
                    raise AlreadyRunning(self.path, again[0].pid if again else None, host=again[0].host if again else None)
        else:
            found = read_lease(self.state, self.key)
            if found is not None and found[0].live:
                raise AlreadyRunning(self.path, found[0].pid, host=found[0].host)
            # Above both the lease's epoch and the one the cursor saw: a deleted lease must not restart lower.
            self.epoch = max(found[0].epoch if found else 0, self._floor(cursors)) + 1
            etag = put_if(self.state, self.key, self._doc(), etag=found[1].etag if found else None)
            if etag is None:  # another host took it between our read and write
                again = read_lease(self.state, self.key)
                raise AlreadyRunning(self.path, again[0].pid if again else None, host=again[0].host if again else None)
            previous = found[0] if found else None
        self._etag = etag
        if self.fenced_source is not None:
            cursors.epoch = self.epoch
            try:
                cursors.claim(self.fenced_source)
            except LeaseLost:  # an even newer holder fenced it meanwhile
                self.release()
                raise AlreadyRunning(self.path, None) from None
            except BaseException:
                self.release()
                raise
            self.claimed = cursors.written(self.fenced_source)
        if previous is not None:
            self._log_takeover(previous)
        self._renewer = threading.Thread(target=self._renew_loop, name=f"lease {self.key}", daemon=True)
        self._renewer.start()

    def _floor(self, cursors: S3CursorStore) -> int:
        """The epoch stored in the fenced source's cursor section (0 without one); the read is kept for the claim."""
        if self.fenced_source is None:
            return 0
        section, got = cursors._read(self.fenced_source)
        cursors.prime(self.fenced_source, (section, got))
        floor = section.get("epoch")
        return floor if isinstance(floor, int) else 0

    def _take_remembered(self) -> str | None:
        """Write the lease with ``If-Match`` on the ETag this host's last release left; its new ETag, or None (read it then)."""
        if self.memo is None:
            return None
        try:
            memo = json.loads(self.memo.read_text())
            etag, epoch = str(memo["etag"]), int(memo["epoch"])
            self._memo_pid = memo.get("pid")
            self.memo.unlink()  # used once: a stale memo costs a request, never a wrong take
        except (OSError, ValueError, TypeError, KeyError):
            return None
        self.epoch = epoch + 1
        taken = put_if(self.state, self.key, self._doc(), etag=etag)
        if taken is None:
            self.epoch = None
        return taken

    def _remember(self, etag: str) -> None:
        """Keep the release's ETag and epoch for this host's next acquire (best effort: without it, one GET more)."""
        if self.memo is None:
            return
        try:
            tmp = write_temp(
                self.memo.parent, self.memo.name, json.dumps({"etag": etag, "epoch": self.epoch, "pid": os.getpid()}).encode(), sync=False
            )
            os.replace(tmp, self.memo)
        except OSError:
            pass

    def _log_takeover(self, previous: LeaseInfo) -> None:
        """``lease.taken_over``: info after a clean release, a warning naming a holder that did not release."""
        if self.log is None:
            return
        fields = {"lease": self.path, "epoch": self.epoch, "previous_host": previous.host, "previous_pid": previous.pid}
        if previous.released:
            self.log.info("lease.taken_over", previous_released=True, **fields)
        else:
            self.log.warning("lease.taken_over", previous_released=False, reason="the holder did not release it and it expired", **fields)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                etag = put_if(self.state, self.key, self._doc(), etag=self._etag)
            except Exception:  # a network fault: try again next round; the fence keeps the cursor safe meanwhile
                continue
            if etag is None:
                self.lost.set()
                if self.log is not None:
                    self.log.error("lease.lost", lease=self.path, epoch=self.epoch)
                return
            self._etag = etag

    def release(self) -> None:
        """Stop renewing and mark the lease released (only if it is still ours)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=30)
            self._renewer = None
        if self._etag is not None and not self.lost.is_set():
            try:
                released = put_if(self.state, self.key, self._doc(released=True), etag=self._etag)
            except Exception:  # it expires by itself
                released = None
            if released is not None:
                self._remember(released)
        self._etag = None

    def __enter__(self) -> S3Lease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
