"""Run leases on S3 (``leases/<source>.json``), which fence the cursor writes of :mod:`memex.state.s3state`.

Leases and fencing. A lease object holds its owner (host, pid), an ``epoch`` and its ``ttl``. It is created with
``If-None-Match: *``, renewed while the poll runs (every ttl/3, ``If-Match``), released at the end, and an
expired or released lease is taken over with ``If-Match`` on its ETag and epoch + 1. Every cursor write made
under a lease carries its epoch, and a write whose epoch is older than the one stored in the section is
refused (:class:`~memex.errors.LeaseLost`): a holder paused past its TTL (a laptop asleep mid-poll, a stopped
VM) can never move the cursor after another host took over. Its messages are create-only objects, so the
refusal loses nothing.

Logs. The lease's events go to the poll's (or backfill's) source log: ``lease.taken_over`` is info after a clean
release and a warning naming the holder that did not release; ``lease.lost`` is an error.

Clocks. Expiry is judged on the S3 server's clock alone: the lease object's ``Last-Modified`` against the
``Date`` of the response that read it. No host's wall clock enters any decision, so hosts may disagree by any
amount (they must stay within S3's 15-minute request-signing window to talk to AWS at all). The design assumes
only that the server's clock runs at a sane rate, and a 1-second allowance covers the headers' granularity.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memex.errors import AlreadyRunning, LeaseLost, StateError
from memex.s3.bucket import S3Bucket
from memex.s3.cas import Versioned, get_versioned, put_if
from memex.state.cursors import Section, utc_now
from memex.state.files import write_temp
from memex.state.s3state import GRANULARITY_S, S3CursorStore, host_name, owner


@dataclass
class LeaseInfo:
    """What a lease object says, for status and messages."""

    host: str | None
    pid: int | None
    epoch: int
    released: bool
    age: float
    ttl: float
    boot: str | None = None  # the holder's boot_id() (None: written by an older memex or where there is none)

    @property
    def live(self) -> bool:
        """Held and not expired (by the server's clock)."""
        return not self.released and self.age < self.ttl + GRANULARITY_S

    def dead_here(self) -> bool:
        """Whether the holder is a process of this very host and boot (same host name, boot and PID namespace) that is gone.

        Such a lease is taken over at once instead of after its TTL: its holder can never release or renew it. Where
        the boot cannot be told (no ``/proc``: macOS), this is never claimed and the lease expires after its TTL.
        """
        if self.boot is None or self.boot != boot_id() or self.host != host_name() or not isinstance(self.pid, int):
            return False
        if self.pid == os.getpid() or self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # another user's process (EPERM): alive
            return False
        return False


def boot_id() -> str | None:
    """This boot of this machine and PID namespace (Linux ``boot_id`` and the namespace's inode), or None where unknown.

    Two hosts that share a host name, or two containers that share a kernel, never share it, so a PID is only ever
    checked on the machine, boot and namespace it belongs to.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


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
            boot=doc.get("boot") if isinstance(doc.get("boot"), str) else None,
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
        return json.dumps({**owner(), "boot": boot_id(), "epoch": self.epoch, "ttl": self.ttl, "acquired_at": utc_now(), **extra}).encode()

    def acquire(self) -> None:
        """Take the lease now or raise :class:`AlreadyRunning` naming the holder.

        However it fails after the lease object was written (a corrupt cursor object, a network fault, a signal), the
        lease is released before the error propagates: a failed poll never leaves its lease held for the next one.
        """
        self._stop = threading.Event()  # a fresh one: an earlier failed attempt on this object set the last
        try:
            previous = self._take()
        except BaseException:
            self.release()  # a no-op unless this attempt wrote the lease (self._etag)
            raise
        if previous is not None:
            self._log_takeover(previous)
        self._renewer = threading.Thread(target=self._renew_loop, name=f"lease {self.key}", daemon=True)
        self._renewer.start()

    def _take(self) -> LeaseInfo | None:
        """Write the lease as ours and claim the fenced section; the previous holder (for the log) or None."""
        cursors = S3CursorStore(self.state)
        previous: LeaseInfo | None = None
        etag = self._etag = self._take_remembered()
        if etag is not None:  # we released it last and nobody wrote it since
            previous = LeaseInfo(host=host_name(), pid=self._memo_pid, epoch=(self.epoch or 1) - 1, released=True, age=0.0, ttl=self.ttl)
            floor = self._floor(cursors)
            if floor >= (self.epoch or 0):  # a cursor fenced above the lease (a lease deleted by hand): go above it
                self.epoch = floor + 1
                self._etag = put_if(self.state, self.key, self._doc(), etag=etag)
                if self._etag is None:
                    self._refused()
        else:
            found = read_lease(self.state, self.key)
            if found is not None and found[0].live and not found[0].dead_here():
                raise AlreadyRunning(self.path, found[0].pid, host=found[0].host)
            # Above both the lease's epoch and the one the cursor saw: a deleted lease must not restart lower.
            self.epoch = max(found[0].epoch if found else 0, self._floor(cursors)) + 1
            self._etag = put_if(self.state, self.key, self._doc(), etag=found[1].etag if found else None)
            if self._etag is None:  # another host took it between our read and write
                self._refused()
            previous = found[0] if found else None
        if self.fenced_source is not None:
            cursors.epoch = self.epoch
            try:
                cursors.claim(self.fenced_source)
            except LeaseLost:  # an even newer holder fenced it meanwhile
                raise AlreadyRunning(self.path, None) from None
            self.claimed = cursors.written(self.fenced_source)
        return previous

    def _refused(self) -> None:
        """Another holder wrote the lease between our read and our write: raise AlreadyRunning naming it."""
        again = read_lease(self.state, self.key)
        raise AlreadyRunning(self.path, again[0].pid if again else None, host=again[0].host if again else None)

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
        elif previous.live:  # taken over before its expiry: its holder is a process of this host that is gone
            self.log.warning("lease.taken_over", previous_released=False, reason="its holder, a process of this host, is no "
                             "longer running (it ended without releasing it)", **fields)  # fmt: skip
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
