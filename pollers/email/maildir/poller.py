"""A local Maildir (``type = "maildir"``): ``new/`` and ``cur/``, Maildir++ subfolders optional.

Keys: ``path`` (the Maildir root, holding ``cur/ new/ tmp/``), ``folders``
(names or globs; ``"INBOX"`` is the root, ``"Sent"`` the Maildir++ folder
``.Sent``; default ``["INBOX"]``) and ``settle_seconds`` (default 2, see
below). Native ID and record: as for IMAP (:mod:`pollers.email.mail.render`);
``extra.maildir_key`` is the file's base name without its ``:2,FLAGS``
suffix (flags change, the message does not).

Cursor, per folder: ``{"ctime_ns": T, "names": [keys with ctime T]}``;
positions ``{folder: T}``. A poll lists ``new/`` then ``cur/`` (a message
renamed between the two listings is seen at least once) and reads only
files whose *ctime* is after T, or equal to T with a key not in ``names``
(equal timestamps neither skip nor repeat a file), in (ctime, key) order.

Why ctime and not mtime: a file moved into the folder keeps its mtime (mail
clients and Dovecot set mtime to the received date, ``mv`` preserves it), so
an mtime cursor would silently skip it; ctime is set by the kernel at every
link or rename and cannot be set back. The price: a flag change renames
the file, so it is read once more and stored as a counted duplicate (same
Message-ID, or the same bytes and hash), never a second object.

A cursor ahead of the scan's clock (the clock stepped back after a file was
stored: a resumed laptop, a VM snapshot, NTP; or a network share whose
server clock did) would hide every new file, whose ctime is below it. The
poller then also reads files of the last :data:`AHEAD_WINDOW` below the
cursor that it has not read in this state, keeping their keys in the
folder's ``"ahead": {"floor_ns", "keys"}`` until the clock passes the cursor
(re-reads of mail stored before are counted duplicates), and logs a warning.

Files whose ctime is within ``settle_seconds`` of the scan's start are left
for the next poll: a file renamed in while the folder is being listed may be
missed by that listing, and must not end up behind the cursor.

One listing per poll: the first ``fetch`` lists the Maildir's folders and each
folder's files once (sorted by ctime, key) and the next ``fetch`` calls of the
same poll (each given the cursor the previous one returned) go on from there,
found by binary search, so draining a folder is linear in its files (a listing
per batch of 500 made it quadratic). Mail that arrives meanwhile is the next
poll's, as with any listing; a ``fetch`` given any other cursor lists again.
"""

from __future__ import annotations

import bisect
import fnmatch
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memex.plugin import Batch, Cursor, Item, Listed, SourceConfig, SourceError
from pollers.email.mail.render import sent_or, to_item

ROOT_FOLDER = "INBOX"
DEFAULT_SETTLE = 2
AHEAD_WINDOW = 86400.0  # seconds below a cursor found ahead of the clock that are read again (dedup absorbs them)


def maildir_key(filename: str) -> str:
    """A Maildir file's stable key: its name without the ``:2,FLAGS`` info (``;2,`` on some systems)."""
    for sep in (":2,", ";2,", "!2,"):
        if sep in filename:
            return filename.split(sep, 1)[0]
    return filename


@dataclass(frozen=True)
class Entry:
    """One message file as listed: where it is and when it arrived (ctime) and was dated (mtime)."""

    key: str
    path: Path
    ctime_ns: int
    mtime_ns: int


def _order(entry: Entry) -> tuple[int, str]:
    return entry.ctime_ns, entry.key


class _Listing:
    """One poll's listing: the folders, and each folder's files sorted by (ctime, key) with the scan's horizon."""

    def __init__(self, folders: list[str], horizon: int) -> None:
        self.folders = folders
        self.horizon = horizon
        self.files: dict[str, list[Entry]] = {}
        self.resume: Cursor = None  # the cursor the last fetch returned: a fetch given it goes on from this listing


def make(source: SourceConfig) -> MaildirPoller:
    """Validate ``[sources.NAME]`` of type maildir and build its poller (no I/O)."""
    keys = source.keys()
    path = keys.path("path")
    folders = keys.strings("folders", default=[ROOT_FOLDER])
    if not folders or not all(folders):
        raise keys.error("folders", 'must list at least one folder name or glob ("INBOX" is the Maildir root)')
    settle = keys.number("settle_seconds", default=DEFAULT_SETTLE, minimum=0, maximum=3600)
    keys.finish()
    return MaildirPoller(source.name, Path(path).expanduser(), tuple(folders), settle)


class MaildirPoller:
    """Reads files that arrived in the configured folders since the cursor."""

    def __init__(self, name: str, root: Path, folders: tuple[str, ...], settle_seconds: float = DEFAULT_SETTLE) -> None:
        self.name = name
        self.root = root
        self.folders = folders
        self.settle_seconds = settle_seconds
        self._listing: _Listing | None = None  # this poll's (see the module's docstring)

    def close(self) -> None:
        """Nothing to release."""

    # -- folders -----------------------------------------------------------
    def _check_root(self) -> None:
        if not self.root.is_dir():
            raise SourceError(f"{self.root}: no such Maildir folder; check `path` in source {self.name!r}")
        if not (self.root / "cur").is_dir() or not (self.root / "new").is_dir():
            raise SourceError(f"{self.root}: not a Maildir (no cur/ and new/); check `path` in source {self.name!r}")

    def _folder_dir(self, folder: str) -> Path:
        return self.root if folder == ROOT_FOLDER else self.root / f".{folder}"

    def folder_names(self, available: list[str] | None = None) -> list[str]:
        """The configured folders that exist (of ``available``, default: listed now), globs expanded, sorted."""
        available = self._available() if available is None else available
        return sorted({n for n in available for p in self.folders if n == p or fnmatch.fnmatchcase(n, p)})

    def missing_folders(self, available: list[str]) -> list[str]:
        """The configured folder names and globs that match none of ``available`` (a warning per poll)."""
        return [p for p in self.folders if not any(n == p or fnmatch.fnmatchcase(n, p) for n in available)]

    def _available(self) -> list[str]:
        """Every folder of the Maildir: the root (INBOX) and each Maildir++ subfolder holding cur/ (one listing)."""
        self._check_root()
        available = [ROOT_FOLDER]
        try:
            with os.scandir(self.root) as it:
                for entry in it:
                    subfolder = entry.name.startswith(".") and entry.name not in (".", "..") and entry.is_dir()
                    if subfolder and (Path(entry.path) / "cur").is_dir():
                        available.append(entry.name[1:])
        except OSError as exc:
            raise SourceError(f"{self.root}: cannot list ({exc.strerror})") from None
        return available

    def _list(self, folder: str) -> list[Entry]:
        """Every message file of a folder (new/ listed before cur/), one entry per key."""
        base = self._folder_dir(folder)
        seen: dict[str, Entry] = {}
        for sub in ("new", "cur"):
            try:
                it = os.scandir(base / sub)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise SourceError(f"{base / sub}: cannot list ({exc.strerror})") from None
            with it:
                for entry in it:
                    if entry.name.startswith("."):
                        continue
                    try:
                        st = entry.stat()
                    except FileNotFoundError:  # renamed or deleted meanwhile; cur/ is listed next
                        continue
                    if not entry.is_file():
                        continue
                    key = maildir_key(entry.name)
                    if key not in seen:
                        seen[key] = Entry(key, Path(entry.path), st.st_ctime_ns, st.st_mtime_ns)
        return list(seen.values())

    def _read(self, folder: str, entry: Entry) -> bytes | None:
        """The file's bytes, following a flag rename that happened after the listing; None if it was deleted."""
        try:
            return entry.path.read_bytes()
        except FileNotFoundError:
            pass
        base = self._folder_dir(folder)
        for sub in ("cur", "new"):
            try:
                names = os.listdir(base / sub)
            except FileNotFoundError:
                continue
            for name in names:
                if maildir_key(name) == entry.key:
                    try:
                        return (base / sub / name).read_bytes()
                    except FileNotFoundError:
                        continue
        return None

    def _item(self, folder: str, entry: Entry, raw: bytes, cursor: Cursor) -> Item:
        extra: dict[str, Any] = {
            "folder": folder,
            "maildir_key": entry.key,
            "received_at": datetime.fromtimestamp(entry.mtime_ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        item = to_item(raw, self.name, cursor, ref=f"{folder}/{entry.key}", extra=extra)
        # A file in cur/ is most often one already read from new/ and renamed by a mail client (seen, flags):
        # if it is stored already, that is expected, not a replay.
        item.expected_dup = entry.path.parent.name == "cur"
        return item

    # -- memex watch (memex.capabilities.Watchable) -----------------------------
    def watch_paths(self) -> list[Path]:
        """``new/`` and ``cur/`` of each configured folder that exists now (the Maildir root's if it cannot be listed).

        A Maildir++ folder created later is not watched until the watcher restarts; its mail is picked up by
        the watcher's periodic poll (and by cron) meanwhile.
        """
        try:
            folders = self.folder_names()
        except SourceError:  # no Maildir there (yet): watch where it should be; the polls report the fault
            folders = [ROOT_FOLDER]
        return [self._folder_dir(folder) / sub for folder in folders for sub in ("new", "cur")]

    # -- the Poller interface ----------------------------------------------
    def validate_cursor(self, cursor: Any) -> str | None:
        """What is wrong with a cursor given by hand, or None: ``{"folders": {NAME: {"ctime_ns": T, "names": [...]}}}``."""
        folders = cursor.get("folders") if isinstance(cursor, dict) and set(cursor) == {"folders"} else None
        if not isinstance(folders, dict):
            return 'a Maildir cursor is {"folders": {"INBOX": {"ctime_ns": T, "names": []}}}'
        for name, st in folders.items():
            if not isinstance(st, dict) or type(st.get("ctime_ns")) is not int or st["ctime_ns"] < 0:
                return f"folder {name!r}: ctime_ns must be a whole number of nanoseconds, not negative"
            names = st.get("names", [])
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                return f"folder {name!r}: names must be a list of file keys"
            ahead = st.get("ahead", {})
            if not isinstance(ahead, dict) or type(ahead.get("floor_ns", 0)) is not int or not isinstance(ahead.get("keys", []), list):
                return f"folder {name!r}: ahead must be a map (floor_ns, keys)"
        return None

    def positions(self, cursor: Cursor) -> dict[str, int]:
        """``{folder: ctime_ns}`` of the newest file stored per folder."""
        if not cursor:
            return {}
        return {name: int(st.get("ctime_ns", 0)) for name, st in (cursor.get("folders") or {}).items()}

    def fetch(self, cursor: Cursor, limit: int) -> Batch:
        """Files of the first folder (sorted) with arrivals after the cursor, oldest ctime first, up to ``limit``.

        A cursor ahead of the scan's own clock (the clock stepped back after a
        file arrived, or a share's server clock did) cannot see new files, whose
        ctime is below it: the folder then also re-reads files that arrived in
        the trailing :data:`AHEAD_WINDOW` below the cursor, remembering their
        keys in the cursor's ``ahead`` until the clock has passed the cursor.
        """
        listing = self._listing
        missing: list[str] = []
        if listing is None or listing.resume is None or cursor != listing.resume:
            scan_start_ns = time.time_ns()
            available = self._available()
            listing = self._listing = _Listing(self.folder_names(available), scan_start_ns - int(self.settle_seconds * 1e9))
            missing = self.missing_folders(available)  # said once per listing (each poll), the other folders are read
        batch = self._fetch(listing, cursor, limit)
        listing.resume = batch.cursor
        if missing:
            batch.warnings[:0] = [f"folders: {name!r} matches no folder of {self.root}; check the name (a subfolder {name} is the "
                                  f"Maildir++ folder .{name} holding cur/ and new/) or remove it from `folders` in source "
                                  f"{self.name!r}" for name in missing]  # fmt: skip
        return batch

    def _files(self, listing: _Listing, folder: str) -> list[Entry]:
        """The folder's files in (ctime, key) order, listed once per poll."""
        files = listing.files.get(folder)
        if files is None:
            files = listing.files[folder] = sorted(self._list(folder), key=_order)
        return files

    def _fetch(self, listing: _Listing, cursor: Cursor, limit: int) -> Batch:
        horizon = listing.horizon
        folders: dict[str, Any] = dict((cursor or {}).get("folders") or {})
        changed, warnings = False, []
        for folder in listing.folders:
            known = folders.get(folder) or {"ctime_ns": 0, "names": []}
            after, names = int(known["ctime_ns"]), set(known.get("names") or [])
            files = self._files(listing, folder)
            ahead = known.get("ahead") if isinstance(known.get("ahead"), dict) else None
            if ahead is None and after > horizon:
                ahead = {"floor_ns": max(0, horizon - int(AHEAD_WINDOW * 1e9)), "keys": []}
                warnings.append(
                    f"{folder}: the cursor is {(after - horizon) / 1e9:.0f}s ahead of this machine's clock (was the clock "
                    f"stepped back?); re-reading what arrived in the last {AHEAD_WINDOW / 3600:g} h below it"
                )
            if ahead is not None:
                floor, seen = int(ahead.get("floor_ns", 0)), set(ahead.get("keys") or [])
                top = min(after, horizon)
                window = files[bisect.bisect_left(files, (floor, ""), key=_order) : bisect.bisect_left(files, (top, ""), key=_order)]
                below = [e for e in window if e.key not in seen]
                if below:
                    items: list[Item] = []
                    for e in below[:limit]:
                        seen.add(e.key)
                        entry = {**known, "ahead": {"floor_ns": floor, "keys": sorted(seen)}}
                        state = {"folders": {**folders, folder: entry}}
                        raw = self._read(folder, e)
                        if raw is not None:
                            items.append(self._item(folder, e, raw, state))
                    return Batch(items=items, cursor={"folders": {**folders, folder: entry}}, warnings=warnings)
                if after <= horizon:  # the clock has passed the cursor: everything below it is read
                    folders[folder] = {k: v for k, v in known.items() if k != "ahead"}
                    changed = True
                elif known.get("ahead") != ahead:
                    folders[folder] = {**known, "ahead": ahead}
                    changed = True
                known = folders.get(folder) or known
            fresh: list[Entry] = []
            for e in files[bisect.bisect_left(files, (after, ""), key=_order) :]:
                if e.ctime_ns >= horizon or len(fresh) == limit:
                    break
                if e.ctime_ns > after or e.key not in names:
                    fresh.append(e)
            if not fresh:
                continue
            items = []
            extra = {k: v for k, v in known.items() if k == "ahead"}
            for e in fresh:
                if e.ctime_ns != after:
                    after, names = e.ctime_ns, set()
                names.add(e.key)
                state = {"folders": {**folders, folder: {"ctime_ns": after, "names": sorted(names), **extra}}}
                raw = self._read(folder, e)
                if raw is None:  # deleted since the listing: nothing to keep, move past it
                    continue
                items.append(self._item(folder, e, raw, state))
            folders = {**folders, folder: {"ctime_ns": after, "names": sorted(names), **extra}}
            return Batch(items=items, cursor={"folders": folders}, warnings=warnings)
        if changed:
            return Batch(items=[], cursor={"folders": folders}, warnings=warnings)
        return Batch(items=[], cursor=cursor if cursor else {"folders": folders}, warnings=warnings)

    def head(self) -> Cursor:
        """A cursor at the newest file of each folder now."""
        folders: dict[str, Any] = {}
        for folder in self.folder_names():
            entries = self._list(folder)
            top = max((e.ctime_ns for e in entries), default=0)
            folders[folder] = {"ctime_ns": top, "names": sorted(e.key for e in entries if e.ctime_ns == top)}
        return {"folders": folders}

    # -- memex verify (memex.capabilities.Inventoried) --------------------------
    def inventory(self, cursor: Cursor) -> Iterator[Listed]:
        """Every file a poll has passed (ctime before the folder's cursor, or at it and named there), folder by folder.

        Each file is read and rendered for its native ID (its Message-ID, else the hash of its bytes), as a poll does.
        """
        folders = (cursor or {}).get("folders") or {}
        for folder in self.folder_names():
            known = folders.get(folder)
            if not known:
                continue
            after, names = int(known.get("ctime_ns", 0)), set(known.get("names") or [])
            for e in sorted(self._list(folder), key=lambda e: (e.ctime_ns, e.key)):
                if e.ctime_ns > after or (e.ctime_ns == after and e.key not in names):
                    continue
                raw = self._read(folder, e)
                if raw is None:
                    continue
                item = self._item(folder, e, raw, None)
                native_id = item.message.native_id if item.message else item.failure.native_id if item.failure else None
                if native_id is not None:
                    yield Listed(native_id, f"{folder}/{e.key}")

    def reread(self, refs: list[str]) -> Iterator[Item]:
        """The items of the files at ``refs`` (``folder/key``), read again; files gone since are skipped."""
        by_folder: dict[str, set[str]] = {}
        for ref in refs:
            folder, _, key = ref.rpartition("/")
            by_folder.setdefault(folder, set()).add(key)
        for folder, keys in sorted(by_folder.items()):
            for e in self._list(folder):
                if e.key in keys:
                    raw = self._read(folder, e)
                    if raw is not None:
                        yield self._item(folder, e, raw, None)

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """Messages sent in ``[since, until)``, folder by folder (sorted), in (mtime, key) order.

        Files are narrowed by mtime (the received date for most delivery
        agents) with two days' slack, then bounded exactly by the Date
        header (or the mtime when the header is unusable). Checkpoint:
        ``{"folder", "mtime_ns", "key"}`` of the last item yielded.
        """
        lo = int((since - timedelta(days=2)).timestamp() * 1e9) if since is not None else None
        hi = int((until + timedelta(days=2)).timestamp() * 1e9) if until is not None else None
        start: tuple[str, int, str] | None = None
        if checkpoint:
            start = (str(checkpoint["folder"]), int(checkpoint["mtime_ns"]), str(checkpoint["key"]))
        for folder in self.folder_names():
            if start is not None and folder < start[0]:
                continue
            entries = sorted(self._list(folder), key=lambda e: (e.mtime_ns, e.key))
            for e in entries:
                if start is not None and (folder, e.mtime_ns, e.key) <= start:
                    continue
                if (lo is not None and e.mtime_ns < lo) or (hi is not None and e.mtime_ns >= hi):
                    continue
                raw = self._read(folder, e)
                if raw is None:
                    continue
                item = self._item(folder, e, raw, {"folder": folder, "mtime_ns": e.mtime_ns, "key": e.key})
                when = sent_or(item.message, datetime.fromtimestamp(e.mtime_ns / 1e9, UTC))
                if when is not None and ((since is not None and when < since) or (until is not None and when >= until)):
                    continue
                yield item
