"""Where cursors and run locks live: the local state dir (default) or S3 (``state_url``), chosen once here.

Callers get objects with one interface either way: a cursor store (``load``, ``section``, ``cursor``,
``update``, ``advance``, ``set_cursor``) and a run lock (``acquire`` raising AlreadyRunning, ``release``,
and ``epoch``, the fencing token cursor writes carry: None for the local flock, which cannot be overtaken).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memex.config import Config
from memex.state.cursors import CursorStore
from memex.state.files import ensure_private_dir
from memex.state.locks import RunLock

if TYPE_CHECKING:
    from memex.deadline import Deadline
    from memex.s3.bucket import S3Bucket
    from memex.state.s3lease import LeaseInfo, S3Lease
    from memex.state.s3state import S3CursorStore


def cursor_store(cfg: Config, *, epoch: int | None = None, deadline: Deadline | None = None,
                 primed: tuple[str, Any] | None = None) -> CursorStore | S3CursorStore:  # fmt: skip
    """The cursor store of this configuration; ``epoch`` fences its writes, ``deadline`` bounds its requests (S3 state only).

    ``primed``: (source, what the lease's claim wrote of it): the store's first read of that source uses it, no GET.
    """
    if cfg.state_url is None:
        return CursorStore(cfg.state_dir)
    from memex.state.s3state import S3CursorStore, open_state

    store = S3CursorStore(_bounded(open_state(cfg), deadline), sources=sorted(cfg.sources), epoch=epoch)
    if primed is not None:
        store.prime(*primed)
    return store


def run_lock(cfg: Config, lease: str, local_path: Path, *, fenced_source: str | None = None,
             deadline: Deadline | None = None, log: Any = None) -> RunLock | S3Lease:  # fmt: skip
    """A run lock: the flock at ``local_path``, or with S3 state the lease ``leases/<lease>.json``.

    ``fenced_source``: the source whose cursor writes carry this lease's epoch; a new lease starts above
    the epoch already stored there, so a deleted lease object cannot restart the count below the fence.
    ``log``: the source logger the lease's events (taken over, lost) go to. With S3 state the lease's
    last release is remembered beside ``local_path`` (``<name>.lease.json``), which saves the next poll a GET.
    """
    ensure_private_dir(cfg.state_dir)
    ensure_private_dir(local_path.parent)
    if cfg.state_url is None:
        return RunLock(local_path)
    from memex.state.s3lease import S3Lease
    from memex.state.s3state import open_state

    memo = local_path.with_name(local_path.stem + ".lease.json")
    return S3Lease(_bounded(open_state(cfg), deadline), lease, ttl=float(cfg.lease_seconds), fenced_source=fenced_source, log=log,
                   memo=memo)  # fmt: skip


def claimed_section(lock: RunLock | S3Lease) -> Any:
    """What the lease's claim wrote of the fenced source's section (for the poll's first read: no GET), or None."""
    return getattr(lock, "claimed", None)


def _bounded(state: S3Bucket, deadline: Deadline | None) -> S3Bucket:
    """The state's S3 client with its requests bounded by ``deadline`` (a poll's :meth:`Deadline.for_saving`)."""
    if deadline is not None:
        state.use_deadline(deadline)
    return state


def host_name() -> str:
    """This host's name as leases record it (``$MEMEX_HOST``, else the system's)."""
    from memex.state.s3state import host_name as name

    return name()


def leases(cfg: Config) -> dict[str, LeaseInfo]:
    """With S3 state: each source's poll lease as last written (holder, epoch, age by the server's clock)."""
    if cfg.state_url is None:
        return {}
    from memex.state.s3lease import read_lease
    from memex.state.s3state import open_state

    state = open_state(cfg)
    out = {}
    for name in sorted(cfg.sources):
        found = read_lease(state, f"leases/{name}.json")
        if found is not None:
            out[name] = found[0]
    return out
