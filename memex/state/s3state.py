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

Leases and fencing: :mod:`memex.state.s3lease`.

Requests. A poll with nothing new costs four: the lease PUT, one GET of the cursor object (which is both the
epoch floor and the poll's cursor), the claim PUT and the release PUT. The lease GET is skipped when this host
released the lease last: the release's ETag and epoch are kept beside the local lock file
(``<state_dir>/locks/<source>.poll.lease.json``) and the next acquire writes with ``If-Match`` on that ETag, which
succeeds only if nobody wrote the lease since (a 412 falls back to reading it: two requests more). A cursor write remembers what it wrote, so the next write of the
same store tries ``If-Match`` on it without a GET first (a stale one meets 412 and reads).
"""

from __future__ import annotations

import copy
import json
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from memex.config import Config
from memex.errors import ConfigError, LeaseLost, StateError
from memex.s3.bucket import S3Bucket
from memex.s3.cas import Versioned, get_versioned, put_if
from memex.state.cursors import FORMAT, CursorEdits, Section, utc_now

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
