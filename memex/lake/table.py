"""The lake's Delta table: where it lives, how it is brought up to date, compacted and vacuumed.

**Where.** Beside the objects, in the store itself: ``<store>/lake/records`` (a folder of the file store, or the same
bucket and prefix on S3), so one URL and one set of credentials reach both. On S3 the credentials come from the
store's own chain (``[store] profile``, region and endpoint; the environment, ``~/.aws``, an instance role), resolved
through boto3 as the store resolves them and handed to delta-rs; commits are create-only (``aws_conditional_put =
etag``: S3's ``If-None-Match``), so two writers can never both commit one version.

**Kept in step, never a second truth.** An update lists the store's record keys (originals and revisions), takes
those the table's ``key`` column lacks, reads them, and commits them in batches, each batch one Delta commit: a crash
(``kill -9`` included) between two commits leaves the table at its last commit, and the next update adds exactly what
is still missing, so every record is in the table once. Parquet files a killed update wrote but never committed are
invisible to readers and removed by ``vacuum``. Each commit carries an application transaction (``memex-lake``, one
version higher than the table's), so a second writer that slipped past the lock loses its commit instead of adding a
batch twice; the lock itself is memex's run lock (the flock in the state folder, or with ``state_url`` the S3 lease),
one writer at a time across hosts.

**Current revisions.** A new revision can make an older version of its message no longer current: such a batch is one
``MERGE`` (insert the new rows, flip ``is_current`` of the old) instead of an append, still one commit.

**Readers** see a table version: the old or the new, never a mix (Delta's snapshot isolation). ``compact`` rewrites
small files into larger ones in one commit; ``vacuum`` deletes files no version younger than the retention needs
(a week by default), so a reader that started before it keeps its files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from memex.errors import MemexError

if TYPE_CHECKING:
    from memex.config import Config
    from memex.store.objects import ObjectStore

TABLE_KEY = "lake/records"
APP_ID = "memex-lake"
BATCH = 50_000
RETENTION_HOURS = 168


class LakeError(MemexError):
    """The lake cannot be used as asked: one line saying why and what to do."""


@dataclass
class UpdateResult:
    """What an update did: records added, revisions that stopped being current, commits, objects it could not read."""

    added: int = 0
    flipped: int = 0
    commits: int = 0
    unreadable: list[str] = field(default_factory=list)
    version: int | None = None
    rebuilt: bool = False


def location(cfg: Config) -> tuple[str, dict[str, str]]:
    """The table's URI and the delta-rs storage options for the configured store."""
    parts = urlsplit(cfg.store.url)
    if parts.scheme == "file":
        return str(Path(unquote(parts.path)) / TABLE_KEY), {}
    if parts.scheme != "s3":
        raise LakeError(f"the lake needs a file:// or s3:// store, not {cfg.store.url!r}")
    from memex.s3.lean import boto_credentials

    source, region = boto_credentials(cfg.store.profile, cfg.store.region)
    creds = source()
    options = {
        "AWS_ACCESS_KEY_ID": creds.access_key,
        "AWS_SECRET_ACCESS_KEY": creds.secret_key,
        "AWS_REGION": region,
        "aws_conditional_put": "etag",
    }
    if creds.token:
        options["AWS_SESSION_TOKEN"] = creds.token
    if cfg.store.endpoint_url:
        options["AWS_ENDPOINT_URL"] = cfg.store.endpoint_url
        options["AWS_ALLOW_HTTP"] = "true" if cfg.store.endpoint_url.startswith("http://") else "false"
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    prefix = parts.path.strip("/")
    return f"s3://{parts.netloc}/{prefix + '/' if prefix else ''}{TABLE_KEY}", options


def open_table(uri: str, options: dict[str, str]) -> Any:
    """The Delta table at ``uri``, or None when none was made there yet."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(uri, storage_options=options or None):
        return None
    return DeltaTable(uri, storage_options=options or None)


def record_keys(store: ObjectStore) -> Iterator[str]:
    """Every record key in the store: originals and revisions (no blobs, no quarantine, no lake)."""
    from memex.search.rows import is_record_key

    for prefix in ("messages/", "revisions/"):
        for key in store.list_keys(prefix):
            if is_record_key(key):
                yield key


@dataclass
class _Version:
    key: str
    month: str
    source: str
    order: tuple[int, float, str]
    current: bool


class _Known:
    """What the table holds: every key, and the versions of the messages whose currency this update can change.

    A message with one version is current, so only the messages that have (or now get) a revision are followed
    (:meth:`follow`): the versions of every message would cost about 0.7 KiB each, 700 MiB at a million records."""

    def __init__(self) -> None:
        self.by_message: dict[str, list[_Version]] = {}
        self.followed: set[str] = set()  # the message keys whose versions are kept (by_message's keys and more)
        self._keys: Any = None  # the table's keys (an Arrow column until :meth:`new` asks)
        self._revised: set[str] = set()  # messages the table holds a revision of

    def load(self, dt: Any) -> None:
        """The table's keys, and which of its messages have a revision."""
        import pyarrow.compute as pc

        from memex.lake.columns import message_key_of

        self._keys = dt.to_pyarrow_table(columns=["key"]).column("key")
        revisions = pc.filter(self._keys, pc.starts_with(self._keys, "revisions/")).to_pylist()
        self._revised = {message_key_of(key) for key in revisions}

    def new(self, listed: list[str]) -> list[str]:
        """The keys of ``listed`` the table does not hold, in their order."""
        if self._keys is None or not listed:
            return listed
        held = set(self._keys.to_pylist())
        return [key for key in listed if key not in held]

    def follow(self, dt: Any, todo: list[str]) -> None:
        """Follow the messages ``todo`` gives a revision to, and those of its originals the table has a revision of;
        with the versions the table (``dt``, None for none) holds of them."""
        from memex.lake.columns import message_key_of

        self.followed = {parent for key in todo if (parent := message_key_of(key)) != key}  # revisions' originals
        self.followed |= {key for key in todo if key in self._revised}  # originals of which the table has a revision
        if dt is None or not self.followed:
            return
        import pyarrow as pa
        import pyarrow.compute as pc

        from memex.lake.columns import order

        # Batch by batch, keeping the followed messages' rows only (a scan's own filter fails here: delta-rs's file
        # statistics are `string_view`, which Arrow's comparison kernels do not take beside `string`).
        columns = ["key", "message_key", "month", "source", "is_current", "revision"]
        wanted = pa.array(sorted(self.followed), pa.string())
        filtered = (batch.filter(pc.is_in(pc.cast(batch.column("message_key"), pa.string()), value_set=wanted))
                    for batch in dt.to_pyarrow_dataset().to_batches(columns=columns))  # fmt: skip
        kept = [batch for batch in filtered if batch.num_rows]
        if not kept:
            return
        t = pa.Table.from_batches(kept)
        at = pc.struct_field(t.column("revision"), "at").to_pylist()
        for key, mkey, month, source, current, rev_at in zip(
            t.column("key").to_pylist(), t.column("message_key").to_pylist(), t.column("month").to_pylist(),
            t.column("source").to_pylist(), t.column("is_current").to_pylist(), at, strict=True,
        ):  # fmt: skip
            self.add(mkey, _Version(key, month, source, order(key, rev_at), bool(current)))

    def add(self, message_key: str, version: _Version) -> None:
        self.by_message.setdefault(message_key, []).append(version)


def _read(store: ObjectStore, key: str) -> dict[str, Any] | None:
    body = store.get(key)
    if body is None:
        return None
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _batches(keys: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(keys), size):
        yield keys[i : i + size]


def _settle(known: _Known, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark which version of each touched message is current; the table's rows whose flag flips, as partial rows."""
    from memex.lake.columns import order

    touched: set[str] = set()
    for r in rows:
        if r["message_key"] not in known.followed:  # its only version: current, and nothing to remember of it
            r["is_current"] = True
            continue
        rev = r["revision"]
        known.add(r["message_key"], _Version(r["key"], r["month"], r["source"], order(r["key"], rev["at"] if rev else None), False))
        touched.add(r["message_key"])
    new = {r["key"]: r for r in rows}
    flips: list[dict[str, Any]] = []
    for mkey in touched:
        versions = known.by_message[mkey]
        latest = max(versions, key=lambda v: v.order)
        for v in versions:
            now = v is latest
            if v.key in new:
                new[v.key]["is_current"] = now
            elif v.current != now:
                flips.append({"key": v.key, "source": v.source, "month": v.month, "is_current": now})
            v.current = now
    return flips


def _commit(uri: str, options: dict[str, str], dt: Any, rows: list[dict[str, Any]], flips: list[dict[str, Any]],
            *, overwrite: bool) -> Any:  # fmt: skip
    """One Delta commit of ``rows`` (and the ``is_current`` flips), tagged with the next application version."""
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    from memex.lake.columns import PARTITIONS, table

    version = (dt.transaction_version(APP_ID) or 0) + 1 if dt is not None else 1
    props = CommitProperties(app_transactions=[Transaction(APP_ID, version)], custom_metadata={"memex.added": str(len(rows))})
    if dt is None or overwrite or not flips:
        write_deltalake(dt if dt is not None else uri, table(rows), partition_by=PARTITIONS,
                        mode="overwrite" if overwrite else "append", storage_options=options or None,
                        commit_properties=props)  # fmt: skip
    else:
        source = table(rows + [_fill(f) for f in flips])
        (
            dt.merge(
                source,
                predicate="t.source = s.source AND t.month = s.month AND t.key = s.key",
                source_alias="s",
                target_alias="t",
                commit_properties=props,
            )
            .when_matched_update(updates={"is_current": "s.is_current"})
            .when_not_matched_insert_all()
            .execute()
        )
    return DeltaTable(uri, storage_options=options or None)


def _fill(partial: dict[str, Any]) -> dict[str, Any]:
    from memex.lake.columns import SCHEMA

    full: dict[str, Any] = dict.fromkeys(SCHEMA.names)
    full.update(partial)
    full["conversation"] = full["conversation"] or {"id": None, "name": None, "participants": []}
    full["sender"] = full["sender"] or {"id": None, "name": None, "is_me": False}
    full["attachments"] = full["attachments"] or []
    return full


def update(cfg: Config, *, rebuild: bool = False, batch: int = BATCH, workers: int = 8, log: Any = None) -> UpdateResult:
    """Bring the table up to date with the store (or build it anew with ``rebuild``), under the lake's run lock."""
    from memex.hold import point_from_env
    from memex.lake.columns import row
    from memex.store import open_store

    uri, options = location(cfg)
    with held(cfg, log):
        store = open_store(cfg.store)
        dt = open_table(uri, options)
        known = _Known()
        if dt is not None and not rebuild:
            known.load(dt)
        result = UpdateResult(rebuilt=rebuild)
        todo = known.new(sorted(record_keys(store)))
        known.follow(None if rebuild else dt, todo)
        first = True
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for keys in _batches(todo, max(1, batch)):
                docs = pool.map(lambda k: (k, _read(store, k)), keys)
                rows = []
                for key, doc in docs:
                    if doc is None:
                        result.unreadable.append(key)
                        continue
                    rows.append(row(key, doc))
                if not rows:
                    continue
                flips = _settle(known, rows)
                dt = _commit(uri, options, dt, rows, flips, overwrite=rebuild and first)
                first = False
                result.added += len(rows)
                result.flipped += len(flips)
                result.commits += 1
                if log is not None:
                    log.info("lake.committed", added=len(rows), flipped=len(flips), version=dt.version())
                if (hold := point_from_env("lake-committed")) is not None:  # tests: pause after the first commit
                    hold.reached(None)
        if rebuild and first:  # an empty store: the rebuild still empties the table
            dt = _commit(uri, options, dt, [], [], overwrite=True)
            result.commits += 1
        result.version = dt.version() if dt is not None else None
        return result


@contextmanager
def held(cfg: Config, log: Any = None) -> Iterator[None]:
    """The lake's run lock held for the block: the flock in the state folder, or with ``state_url`` the S3 lease."""
    from memex.errors import AlreadyRunning
    from memex.state.backend import run_lock

    lock = run_lock(cfg, "lake", cfg.state_dir / "locks" / "lake.lock", log=log)
    try:
        lock.acquire()
    except AlreadyRunning as exc:
        raise LakeError(f"another lake update is running (pid {exc.pid if exc.pid is not None else 'unknown'}); wait for it") from None
    try:
        yield
    finally:
        lock.release()


def compact(cfg: Config, *, log: Any = None) -> dict[str, Any]:
    """Rewrite small files into larger ones, one commit; readers see the table before or after, never between."""
    uri, options = location(cfg)
    with held(cfg, log):
        dt = open_table(uri, options)
        if dt is None:
            raise LakeError(f"no lake table at {uri}; run `memex lake update` first")
        metrics: dict[str, Any] = dt.optimize.compact()
        return metrics


def vacuum(cfg: Config, *, retention_hours: int = RETENTION_HOURS, dry_run: bool = False, log: Any = None) -> list[str]:
    """Delete files that no version younger than ``retention_hours`` needs (and those a killed update left behind)."""
    uri, options = location(cfg)
    with held(cfg, log):
        dt = open_table(uri, options)
        if dt is None:
            raise LakeError(f"no lake table at {uri}; run `memex lake update` first")
        removed: list[str] = dt.vacuum(retention_hours=retention_hours, dry_run=dry_run, enforce_retention_duration=False)
        return removed


def status(cfg: Config) -> dict[str, Any]:
    """The table's URI, version, files, rows and when it was last committed (None values when there is no table)."""
    uri, options = location(cfg)
    dt = open_table(uri, options)
    if dt is None:
        return {"uri": uri, "version": None, "files": 0, "rows": 0, "committed_at": None}
    history = dt.history(1)
    stamp = history[0].get("timestamp") if history else None
    return {
        "uri": uri,
        "version": dt.version(),
        "files": len(dt.file_uris()),
        "rows": dt.count(),
        "committed_at": datetime.fromtimestamp(stamp / 1000).astimezone().isoformat(timespec="seconds") if stamp else None,
    }
