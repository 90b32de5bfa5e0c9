"""mbox files (``type = "mbox"``): Google Takeout, Thunderbird folders, Apple Mail exports, every mbox variant.

Keys: ``path`` (an mbox file, or a folder searched for them: Thunderbird's ``Mail/Local Folders``, a Takeout's
``Mail`` folder, a folder of Apple Mail ``Name.mbox/`` bundles), ``variant`` (``auto``, ``mboxrd``, ``mboxo``,
``mboxcl``, ``mboxcl2``; :mod:`pollers.email.mbox.read`), ``settle_seconds`` (default 10) and ``into`` (the name of
the mail source these mails belong to, e.g. the ``imap`` source of the same Gmail account: records are stored under
its name, so one mail read from both is one object; default: this source's own name).

Why a source, not a backfill: mbox files are read the way a poll reads anything: from a cursor, in order, data first
and cursor last. Thunderbird appends to its folder files and rewrites them when it compacts, and a cron poll of a
source follows both; a one-off Takeout file is the same poll run until it has read the whole file (one
``memex poll SOURCE --max-seconds N`` or several: each resumes where the last stopped).

Files in a folder: every regular file (at any depth, not hidden) whose first line is an mbox separator; empty files
(Thunderbird's empty folders) and other files (``.msf`` indexes, ``Info.plist``) are passed silently, but a file named
``mbox`` or ``*.mbox`` / ``*.mbx`` that is not an mbox gets one warning line. A ``path`` that is a file must be one.

Native ID and record: as for IMAP and Maildir (:mod:`pollers.email.mail.render`), with ``extra.mbox_file`` (the path
below ``path``), ``extra.mbox_offset`` (where its separator is) and ``extra.folder`` (the file's name as a folder:
``.mbox`` and Thunderbird's ``.sbd`` taken off). A Takeout mail's ``X-GM-THRID`` and ``X-Gmail-Labels`` (which
Takeout puts in front of the mail as Gmail holds it) become ``extra.gmail``'s ``thrid`` and ``labels`` (the IMAP
poller's shape, :mod:`pollers.email.imap.gmail`) and are taken off the stored bytes, and the separator's ``<id>@xxx``
becomes its ``msgid`` (and ``msgid_hex``): the mail is
then byte for byte what Gmail's IMAP gives.

Cursor: ``{"files": {REL: {"offset", "mails", "head", "head_len", "tail", "size", "mtime_ns", "ino"}}, "mails": N}``:
per file, the byte offset just past the last mail stored, and what shows it is still the file that was read: a
SHA-256 of its first ``head_len`` bytes (up to :data:`HEAD`, never past the offset) and of the :data:`TAIL` bytes
before the offset, both hashed from the bytes read, Thunderbird's flag headers (rewritten in place) left out. A poll goes on at the offset only if both still match and a separator (or the end) is
there: a file that grew (Thunderbird appending) is read on; one rewritten before the offset (compacted, replaced) is
read again from its start (``source.reset``), its mails stored before counting as duplicates. ``size``,
``mtime_ns`` and ``ino`` only spare an unchanged file the check. Positions ``{"mails": N}``: mails passed, only
growing.

A file's last mail (nothing after it yet) is read once the file has not changed for ``settle_seconds``: a writer
may still be appending it. One that then ends mid-line is stored as it is, with a warning.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memex.plugin import Batch, Cursor, Failure, Item, Listed, SourceConfig, SourceError, Unchecked
from pollers.email.mbox.read import MAX_MAIL, VARIANTS, Mail, Reader, starts_mbox, takeout_fields, takeout_msgid

DEFAULT_SETTLE = 10
HEAD = 64 << 10
TAIL = 4 << 10
BATCH_BYTES = 16 << 20  # a batch holds at most about this much mail (500 mails with attachments could be gigabytes)
CLAIMS = (".mbox", ".mbx")  # names that say "mbox": a file so named that is not one is worth a line
_MOZILLA_FLAGS = re.compile(rb"^(X-Mozilla-(?:Status2?|Keys):)[^\r\n]*", re.M)
_SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def make(source: SourceConfig) -> MboxPoller:
    """Validate ``[sources.NAME]`` of type mbox and build its poller (no I/O)."""
    keys = source.keys()
    path = keys.path("path")
    variant = keys.text("variant", default="auto")
    if variant not in VARIANTS:
        raise keys.error("variant", f"must be one of {', '.join(VARIANTS)}, not {variant!r}")
    settle = keys.number("settle_seconds", default=DEFAULT_SETTLE, minimum=0, maximum=86400)
    into = keys.text("into", default=None)
    if into is not None and not _SOURCE_NAME.match(into):
        raise keys.error("into", f"must be the name of a mail source (letters, digits, '.', '_', '-'), not {into!r}")
    keys.finish()
    return MboxPoller(source.name, Path(path).expanduser(), variant, settle, into)


def _sha(data: bytes) -> str:
    """The SHA-256 of bytes of the file, with the values of Thunderbird's flag headers left out: Thunderbird rewrites
    ``X-Mozilla-Status``, ``-Status2`` and ``-Keys`` in place when a mail is read or tagged, which is not a rewrite."""
    import hashlib  # on first use: an idle poll never needs it

    if b"X-Mozilla-" in data:
        data = _MOZILLA_FLAGS.sub(rb"\1", data)
    return hashlib.sha256(data).hexdigest()


def folder_of(rel: str) -> str:
    """A file's path below ``path`` as a folder name: ``Inbox.sbd/Work`` is ``Inbox/Work``, ``Work.mbox/mbox`` is ``Work``."""
    parts = rel.split("/")
    if len(parts) > 1 and parts[-1] == "mbox" and parts[-2].endswith(".mbox"):
        parts = parts[:-1]
    out = [p[: -len(".sbd")] if p.endswith(".sbd") else p for p in parts]
    out[-1] = out[-1][: -len(".mbox")] if out[-1].endswith(".mbox") and len(out[-1]) > 5 else out[-1]
    return "/".join(out)


class _Live:
    """The file being read in this poll: the reader, and the cursor the last batch returned (a fetch given it goes on)."""

    def __init__(self, rel: str, fh: Any, head: bytes, offset: int, variant: str) -> None:
        self.rel = rel
        self.fh = fh
        self.head = head  # the file's first HEAD bytes, read when it was opened
        self._heads: dict[int, str] = {}
        self.reader = Reader(fh, offset, variant)
        self.mails: Iterator[Mail] = self.reader.mails()
        self.entry: dict[str, Any] = {}  # the file's cursor entry so far (offset, mails, head, stat)
        self.resume: Cursor = None

    def at(self, end: int, tail: str, mails: int) -> dict[str, Any]:
        """The file's cursor entry at offset ``end``: the head hash covers the bytes before it only (at most HEAD),
        so bytes after the offset that a writer still changes never make the file look rewritten."""
        size = min(len(self.head), end)
        if size not in self._heads:
            self._heads[size] = _sha(self.head[:size])
        return {**self.entry, "offset": end, "head_len": size, "head": self._heads[size], "tail": tail, "mails": mails}


class MboxPoller:
    """Reads the mails of each mbox file after the file's offset, file by file in sorted order."""

    def __init__(
        self, name: str, root: Path, variant: str = "auto", settle_seconds: float = DEFAULT_SETTLE, into: str | None = None
    ) -> None:
        self.name = name
        self.root = root
        self.variant = variant
        self.settle_seconds = settle_seconds
        self.into = into or name
        self._live: _Live | None = None
        self._warned: set[tuple[str, str]] = set()  # (file, kind): each fault once per poll
        self._drawn = 0.0  # when the progress line was last drawn on the terminal (0: never)

    def close(self) -> None:
        """Close the file being read (and clear the progress line)."""
        if self._drawn:
            sys.stderr.write("\r\x1b[2K")
            self._drawn = 0.0
        if self._live is not None:
            self._live.fh.close()
            self._live = None

    def watch_paths(self) -> list[Path]:
        """``memex watch``: the file, or the folder (every change inside it)."""
        return [self.root]

    # -- files -----------------------------------------------------------------------------------------
    def files(self, warnings: list[str]) -> list[tuple[str, Path]]:
        """The mbox files under ``path`` (relative name, path), sorted; a named file that is not an mbox is a warning,
        and so is a folder holding no mbox file at all (every poll: never a silent ``idle`` for ever)."""
        self._check_root()
        if self.root.is_file():
            if self.root.stat().st_size == 0:  # an empty folder file (Thunderbird): nothing yet
                return []
            if not self._is_mbox(self.root):
                raise SourceError(
                    f"{self.root}: not an mbox file (it does not start with a 'From ' line); check `path` in source {self.name!r}"
                )
            return [(self.root.name, self.root)]
        found: list[tuple[str, Path]] = []
        empty = 0
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for n in sorted(names):
                if n.startswith("."):
                    continue
                path = Path(folder) / n
                rel = path.relative_to(self.root).as_posix()
                if not path.is_file():
                    continue
                if path.stat().st_size == 0:
                    empty += 1
                    continue
                if self._is_mbox(path):
                    found.append((rel, path))
                elif n == "mbox" or n.lower().endswith(CLAIMS):
                    self._warn(warnings, rel, "not-mbox", f"{rel}: not an mbox file (it does not start with a 'From ' line); skipped")
        if not found and not empty:  # Takeout/ instead of Takeout/Mail: say so, or the poll reads "idle" for ever
            self._warn(warnings, ".", "no-mbox", f"{self.root}: no mbox file in this folder or below it; point `path` in source "
                       f"{self.name!r} at the folder (or file) holding them (a Takeout's Mail folder, Thunderbird's Local Folders)")  # fmt: skip
        return sorted(found)

    def _check_root(self) -> None:
        """Raise the one line for a ``path`` that is neither a file nor a folder: missing, a FIFO, a link loop, ..."""
        import stat as st_mode

        try:
            mode = self.root.stat().st_mode
        except FileNotFoundError:
            raise SourceError(f"{self.root}: no such file or folder; check `path` in source {self.name!r}") from None
        except OSError as exc:
            import errno

            why = "a symbolic link that leads back to itself (a loop)" if exc.errno == errno.ELOOP else f"cannot be read ({exc.strerror})"
            raise SourceError(f"{self.root}: {why}; check `path` in source {self.name!r}") from None
        if st_mode.S_ISREG(mode) or st_mode.S_ISDIR(mode):
            return
        kind = "a named pipe (FIFO)" if st_mode.S_ISFIFO(mode) else "a socket" if st_mode.S_ISSOCK(mode) else "a device"
        raise SourceError(f"{self.root}: {kind}, not an mbox file or a folder of them; memex reads mbox files where they lie "
                          f"(save the mails to a file first); check `path` in source {self.name!r}")  # fmt: skip

    def _is_mbox(self, path: Path) -> bool:
        try:
            with path.open("rb") as fh:
                return starts_mbox(fh.read(4096))
        except OSError as exc:
            raise SourceError(f"{path}: cannot read ({exc.strerror})") from None

    def _warn(self, warnings: list[str], rel: str, kind: str, line: str) -> None:
        if (rel, kind) not in self._warned:
            self._warned.add((rel, kind))
            warnings.append(line)

    # -- the cursor ------------------------------------------------------------------------------------
    def positions(self, cursor: Cursor) -> dict[str, int]:
        """``{"mails": N}``: mails passed in every file, only growing."""
        return {"mails": int((cursor or {}).get("mails", 0))}

    def validate_cursor(self, cursor: Any) -> str | None:
        """What is wrong with a cursor given by hand, or None."""
        if not isinstance(cursor, dict) or not isinstance(cursor.get("files", {}), dict) or type(cursor.get("mails", 0)) is not int:
            return 'an mbox cursor is {"files": {FILE: {"offset": N, ...}}, "mails": N}'
        for rel, entry in cursor.get("files", {}).items():
            if not isinstance(entry, dict) or type(entry.get("offset")) is not int or entry["offset"] < 0:
                return f"file {rel!r}: offset must be a whole number of bytes, not negative"
        return None

    @staticmethod
    def _same_file(path: Path, entry: dict[str, Any], size: int) -> bool:
        """Whether the file still holds, up to the entry's offset, the bytes that were read (and a separator there)."""
        offset = int(entry.get("offset", 0))
        if offset == 0:
            return True
        if size < offset:
            return False
        with path.open("rb") as fh:
            head_len = int(entry.get("head_len", 0))
            if _sha(fh.read(head_len)) != entry.get("head"):
                return False
            fh.seek(max(0, offset - TAIL))
            if _sha(fh.read(offset - max(0, offset - TAIL))) != entry.get("tail"):
                return False
            after = fh.read(4096).lstrip(b"\r\n\0")
        return not after or starts_mbox(after)

    def head(self) -> Cursor:
        """``start = "now"``: each file's end as it is now (the mails already there are history, for no poll)."""
        files: dict[str, Any] = {}
        for rel, path in self.files([]):
            with path.open("rb") as fh:
                st = os.fstat(fh.fileno())
                head = fh.read(HEAD)
                files[rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "offset": st.st_size,
                              "head_len": len(head), "head": _sha(head), "tail": _sha(_tail(fh, st.st_size)), "mails": 0}  # fmt: skip
        return {"files": files, "mails": 0}

    # -- memex verify (memex.capabilities.Inventoried; pollers.email.mbox.inventory) ------------------------
    def inventory(self, cursor: Cursor) -> Iterator[Listed | Unchecked]:
        """Every mail before each file's offset (files gone or rewritten since: not checked)."""
        from pollers.email.mbox.inventory import inventory

        return inventory(self, cursor)

    def reread(self, refs: list[str]) -> Iterator[Item]:
        """The items of the mails at ``refs`` (``file@offset``), read again."""
        from pollers.email.mbox.inventory import reread

        return reread(self, refs)

    # -- reading ---------------------------------------------------------------------------------------
    def fetch(self, cursor: Cursor, limit: int) -> Batch:
        """Up to ``limit`` mails of the first file (sorted) with mails after its offset; none left: caught up."""
        cursor = cursor or {}
        files: dict[str, Any] = dict(cursor.get("files") or {})
        total = int(cursor.get("mails", 0))
        live = self._live
        warnings: list[str] = []
        if live is not None and live.resume == cursor and cursor:
            batch = self._read(live, files, total, limit, warnings, None)
            if batch.items or batch.cursor != cursor:
                return batch
        self.close()
        for rel, path in self.files(warnings):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            entry = files.get(rel) or {}
            stat = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}
            if entry and int(entry.get("offset", 0)) == st.st_size and all(entry.get(k) == v for k, v in stat.items()):
                continue  # read to its end and untouched since
            reset = None
            if entry and not self._same_file(path, entry, st.st_size):
                reset = f"{rel}: the file changed before the point read (rewritten or compacted); reading it again from the start"
                entry = {}
            fh = path.open("rb")
            offset = int(entry.get("offset", 0))
            live = _Live(rel, fh, fh.read(HEAD), offset, self.variant)
            live.entry = {**entry, **stat}
            live.entry = live.at(offset, str(entry.get("tail", _sha(b""))), int(entry.get("mails", 0)))
            batch = self._read(live, files, total, limit, warnings, reset)
            if batch.items or reset or batch.cursor != cursor:
                return batch
            self.close()
        return Batch(items=[], cursor=cursor if cursor else {"files": files, "mails": total}, warnings=warnings)

    def _read(self, live: _Live, files: dict[str, Any], total: int, limit: int, warnings: list[str], reset: str | None) -> Batch:
        """The next mails of the live file, up to ``limit``; its last mail only once the file has settled."""
        from pollers.email.mail.render import to_item  # on first use: an idle poll never renders

        self._live = live
        rel = live.rel
        st = os.fstat(live.fh.fileno())
        settled = time.time() - st.st_mtime_ns / 1e9 >= self.settle_seconds
        items: list[Item] = []
        marks: list[tuple[int, str, int]] = []  # (end offset, tail hash, mails in the file) after each item
        mails_in_file = int(live.entry.get("mails", 0))
        stopped_early = False
        held = 0  # bytes of mail in this batch
        for mail in live.mails:
            if mail.last and not settled:  # a writer may still be appending it: a later poll reads it
                stopped_early = True
                break
            mails_in_file += 1
            tail = _sha(live.reader.before(mail.end, TAIL))
            item = self._item(rel, mail, warnings, to_item)
            if item is not None:
                items.append(item)
                marks.append((mail.end, tail, mails_in_file))
            else:
                live.entry = live.at(mail.end, tail, mails_in_file)
            held += len(mail.raw)
            if len(items) >= limit or held >= BATCH_BYTES:  # a batch of large mails is cut short: memory stays flat
                break
        else:
            stopped_early = True  # the end of the file

        def cursor_at(n: int) -> Cursor:
            end, tail, count = marks[n - 1]
            return {"files": {**files, rel: live.at(end, tail, count)}, "mails": total + n}

        if marks and sys.stderr.isatty() and time.monotonic() - self._drawn >= 1.0:
            self._progress(rel, marks[-1][0], st.st_size, marks[-1][2])
        if marks:
            live.entry = live.at(*marks[-1])
        out = {"files": {**files, rel: live.entry}, "mails": total + len(items)}
        if stopped_early:
            self.close()
        else:
            live.resume = out
        return Batch(items=items, cursor=out, reset=reset, warnings=warnings, cursor_at=cursor_at if marks else None)

    def _progress(self, rel: str, offset: int, size: int, mails: int) -> None:
        """The progress line on a terminal (only there: cron's output stays empty): file, share read, mails."""
        shown = "".join(c if c.isprintable() else "?" for c in rel)  # a file name never sends a control sequence
        sys.stderr.write(f"\r\x1b[2K{self.name}: {shown} {100 * offset / max(size, 1):3.0f}% ({mails:,} mails)")
        sys.stderr.flush()
        self._drawn = time.monotonic()

    def _item(self, rel: str, mail: Mail, warnings: list[str], to_item: Callable[..., Item]) -> Item | None:
        """The item of one mail (None: nothing there, a separator alone), its faults noted once per file."""
        ref = f"{rel}@{mail.start}"
        if mail.too_big:
            why = f"longer than {MAX_MAIL >> 20} MiB (not an mbox from here on?); its first MiB is kept here, the rest skipped"
            return Item(cursor=None, failure=Failure(native_id=ref, reason=why, raw=mail.raw, ref=ref))
        raw = mail.raw
        if not raw.strip():
            return None
        if mail.unquoted:
            self._warn(
                warnings,
                rel,
                "unquoted",
                f"{rel}: a 'From ' line in a mail's body was not quoted by its writer (first at byte {mail.unquoted_at}, in the "
                f"mail at byte {mail.start}); kept inside that mail",
            )
        if mail.nul_bytes:
            self._warn(
                warnings,
                rel,
                "nul",
                f"{rel}: NUL bytes after the mail at byte {mail.start} (left by a crash?) were passed over; the mails around them are read",
            )
        problems = list(mail.problems)
        if mail.cr:
            problems.append("mbox: classic Mac line ends (CR only), read as LF")
            self._warn(warnings, rel, "cr", f"{rel}: lines end with a lone CR (classic Mac OS); read as LF line ends")
        if _mixed(raw):
            problems.append("mbox: mixed line ends (LF and CRLF); kept as written")
            self._warn(
                warnings, rel, "mixed", f"{rel}: mixed line ends (LF and CRLF) in the mail at byte {mail.start}; mails are kept as written"
            )
        if mail.last and not raw.endswith(b"\n"):
            problems.append("mbox: the last mail of the file ends mid-line (cut short?)")
            self._warn(
                warnings,
                rel,
                "cut",
                f"{rel}: the last mail ends mid-line (a download or copy cut short?); stored as it is: fetch the file again if it is incomplete",
            )
        extra: dict[str, Any] = {"mbox_file": rel, "mbox_offset": mail.start, "folder": folder_of(rel)}
        if raw[:16].lower().startswith((b"x-gm-thrid:", b"x-gmail-labels:")):
            raw, gmail = takeout_fields(raw)
            msgid = takeout_msgid(mail.envelope)
            if msgid is not None:
                gmail = {"msgid": msgid, "msgid_hex": format(int(msgid), "x"), **gmail}
            extra["gmail"] = gmail
        item = to_item(raw, self.into, None, ref=ref, extra=extra)
        if item.message is not None and problems:
            item.message.extra["problems"] = sorted(set(item.message.extra.get("problems", [])) | set(problems))
        return item


def _mixed(raw: bytes) -> bool:
    """Whether the mail's first and last 4 KiB mix LF and CRLF line ends (a bounded look: whole counts cost a scan each)."""
    tail = raw.find(b"\n", max(0, len(raw) - 4096)) + 1  # from a line's start: never half a CRLF
    for lo, hi in ((0, 4096), (tail, len(raw))):
        lf, crlf = raw.count(b"\n", lo, hi), raw.count(b"\r\n", lo, hi)
        if crlf and lf != crlf:
            return True
    return False


def _tail(fh: Any, end: int) -> bytes:
    """The TAIL bytes before ``end`` (fewer at the start of the file), read from the open file."""
    start = max(0, end - TAIL)
    return os.pread(fh.fileno(), end - start, start)
