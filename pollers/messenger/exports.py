"""Messenger exports in the inbox folder: which are complete, what each one is, and reading them in place.

An export is a ``.zip`` file or a folder (an unpacked export) directly in the inbox. It is *settled*
when nothing in it was written, renamed or created for ``settle_seconds`` (newest ctime/mtime of the
zip, or of every file and folder inside the folder); a zip must also open with a valid central
directory. Anything else in the inbox (a ``.crdownload`` file, a text file) is left alone.

Two identities per export:

- its *signature*, cheap to compute every poll: a zip's size and mtime (kept by ``mv`` and by a
  rename), a folder's hash of every file's relative path, size and mtime;
- its *content hash*, computed only for a signature not seen before: a zip's SHA-256 over its central
  directory (every member's name, size and CRC-32, so every byte of every member is covered, without
  reading 30 GB every time a zip is moved or copied again); a folder's SHA-256 over every file's
  relative path and size and the SHA-256 of every ``.json`` file's bytes (the messages; a media file
  changed in place with the same size is not noticed).

The layout is recognised from the member names only (:func:`layout`).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from memex.plugin import SourceError

SECTIONS = ("inbox", "archived_threads", "filtered_threads", "message_requests", "e2ee_cutover")
_THREAD_FILE = re.compile(
    r"^(?P<dir>(?:.*/)?messages/(?P<section>" + "|".join(SECTIONS) + r")/(?P<folder>[^/]+))/message_(?P<n>\d+)\.json$"
)
_HTML_FILE = re.compile(r"(?:^|/)messages/(?:" + "|".join(SECTIONS) + r")/[^/]+/message_\d+\.html?$")
JSON_HINT = "download your information again with Format: JSON (Settings > Your information > Download your information)"


class LayoutError(Exception):
    """An export memex cannot read: the message names the export and says what to download instead."""


@dataclass(frozen=True)
class Unit:
    """One thread of an export: a standard thread folder (its ``message_N.json`` files, N=1 first) or an
    encrypted-chat thread file."""

    key: str  # the folder or file path inside the export; units are read in sorted key order
    files: tuple[str, ...]
    kind: str  # "standard" or "e2ee"
    section: str | None = None
    folder: str | None = None


@dataclass
class Candidate:
    """An entry of the inbox that may be an export."""

    path: Path
    is_zip: bool
    signature: str
    changed_at: float  # newest ctime/mtime (seconds since the epoch)
    mtime: float


class Reader:
    """Reads one export in place: a zip's members streamed, or a folder's files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = path.name
        self._zip: zipfile.ZipFile | None = None
        self._names: list[str] | None = None
        if path.is_dir():
            return
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise LayoutError(
                f"{self.label}: not a complete zip file ({type(exc).__name__}); if it is still being copied it is read once it "
                f"has settled, otherwise download it again"
            ) from None

    def names(self) -> list[str]:
        """Every file of the export (posix paths relative to its root), sorted."""
        if self._names is None:
            if self._zip is not None:
                self._names = sorted(i.filename for i in self._zip.infolist() if not i.is_dir())
            else:
                found: list[str] = []
                for top, dirs, files in os.walk(self.path):
                    dirs.sort()
                    rel = PurePosixPath(Path(top).relative_to(self.path).as_posix())
                    found.extend(str(rel / f) if str(rel) != "." else f for f in files)
                self._names = sorted(found)
        return self._names

    def read(self, name: str) -> bytes:
        """The whole bytes of one (JSON) file."""
        if self._zip is not None:
            return self._zip.read(name)
        return (self.path / name).read_bytes()

    def size(self, name: str) -> int | None:
        """A file's size, or None when the export does not hold it."""
        if self._zip is not None:
            try:
                return self._zip.getinfo(name).file_size
            except KeyError:
                return None
        try:
            st = (self.path / name).stat()
        except OSError:
            return None
        return st.st_size if not (self.path / name).is_dir() else None

    def opener(self, name: str) -> Callable[[], IO[bytes]]:
        """A fresh stream of a file each call (a zip member decompressed as it is read, never whole)."""
        zf = self._zip
        if zf is not None:
            return lambda: zf.open(name)
        full = self.path / name
        return lambda: open(full, "rb")

    def content_hash(self) -> str:
        """The export's content hash (see the module docstring)."""
        h = hashlib.sha256()
        if self._zip is not None:
            h.update(b"zip\n")
            for info in sorted(self._zip.infolist(), key=lambda i: i.filename):
                if not info.is_dir():
                    h.update(f"{info.filename}\0{info.file_size}\0{info.CRC:08x}\n".encode("utf-8", "surrogateescape"))
            return h.hexdigest()
        h.update(b"dir\n")
        for name in self.names():
            full = self.path / name
            part = ""
            if name.endswith(".json"):
                part = hashlib.sha256(full.read_bytes()).hexdigest()
            h.update(f"{name}\0{full.stat().st_size}\0{part}\n".encode("utf-8", "surrogateescape"))
        return h.hexdigest()

    def close(self) -> None:
        """Close the zip."""
        if self._zip is not None:
            self._zip.close()


@dataclass
class Layout:
    """What an export holds: its thread units (standard or encrypted-chat), in read order."""

    kind: str
    units: list[Unit] = field(default_factory=list)


def layout(reader: Reader) -> Layout:
    """Recognise an export from its file names, or raise :class:`LayoutError` saying what to download instead."""
    names = reader.names()
    threads: dict[str, list[tuple[int, str]]] = {}
    where: dict[str, tuple[str, str]] = {}
    html = instagram = False
    for name in names:
        m = _THREAD_FILE.match(name)
        if m is not None:
            threads.setdefault(m["dir"], []).append((int(m["n"]), name))
            where[m["dir"]] = (m["section"], m["folder"])
        elif _HTML_FILE.search(name):
            html = True
        if "instagram" in name.split("/", 2)[0].lower() or "/instagram_" in name.lower() or name.lower().startswith("instagram_"):
            instagram = True
    if instagram:
        raise LayoutError(f"{reader.label}: an Instagram export, not Messenger; download your Facebook information (Format: JSON) instead")
    if threads:
        units = [
            Unit(key=d, files=tuple(n for _, n in sorted(files)), kind="standard", section=where[d][0], folder=where[d][1])
            for d, files in sorted(threads.items())
        ]
        return Layout("standard", units)
    if html:
        raise LayoutError(f"{reader.label}: an HTML export, which memex cannot read; {JSON_HINT}")
    e2ee = [n for n in names if n.endswith(".json") and n.count("/") <= 1 and "/messages/" not in f"/{n}"]
    if e2ee:
        return Layout("e2ee", [Unit(key=n, files=(n,), kind="e2ee") for n in e2ee])
    raise LayoutError(
        f"{reader.label}: no Messenger messages found (no messages/inbox/*/message_1.json, no encrypted-chat threads); {JSON_HINT}"
    )


def scan(inbox: Path, settle_seconds: float) -> tuple[list[Candidate], int]:
    """Settled candidates in the inbox, oldest first, and how many entries are still settling."""
    try:
        entries = sorted(os.scandir(inbox), key=lambda e: e.name)
    except FileNotFoundError:
        raise SourceError(f"{inbox}: no such inbox folder; create it or fix `inbox`") from None
    except OSError as exc:
        raise SourceError(f"{inbox}: cannot list the inbox ({exc.strerror})") from None
    horizon = time.time() - settle_seconds
    ready: list[Candidate] = []
    settling = 0
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_dir():
                cand = _folder(Path(entry.path))
            elif entry.is_file() and entry.name.lower().endswith(".zip"):
                st = entry.stat()
                cand = Candidate(Path(entry.path), True, f"zip:{st.st_size}:{st.st_mtime_ns}", max(st.st_ctime, st.st_mtime), st.st_mtime)
            else:
                continue
        except FileNotFoundError:  # removed while listing
            continue
        if cand.changed_at > horizon:
            settling += 1
            continue
        ready.append(cand)
    ready.sort(key=lambda c: (c.mtime, c.path.name))
    return ready, settling


_BARE_THREAD_FILE = re.compile(r"message_\d+\.(?:json|html?)", re.IGNORECASE)


def stray_files(inbox: Path) -> list[str]:
    """Names of thread files (``message_1.json``) lying directly in the inbox: not an export, so never read (a warning)."""
    try:
        with os.scandir(inbox) as it:
            return sorted(e.name for e in it if _BARE_THREAD_FILE.fullmatch(e.name) and e.is_file())
    except OSError:  # scan() reports an inbox it cannot list
        return []


def _folder(path: Path) -> Candidate:
    h = hashlib.sha256()
    st = path.stat()
    newest, mtime = max(st.st_ctime, st.st_mtime), st.st_mtime
    for top, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files) + dirs:
            full = os.path.join(top, name)
            try:
                s = os.stat(full)
            except FileNotFoundError:
                continue
            newest = max(newest, s.st_ctime, s.st_mtime)
            if name in files:
                rel = os.path.relpath(full, path)
                h.update(f"{rel}\0{s.st_size}\0{s.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return Candidate(path, False, "dir:" + h.hexdigest()[:40], newest, mtime)


@dataclass
class Opened:
    """An export opened for reading: its reader, layout and content hash."""

    candidate: Candidate
    reader: Reader
    layout: Layout
    hash: str
