"""The shared cursor store: one ``cursors.json``, one section per source.

Every change goes through :meth:`CursorStore.update`, which

1. takes an exclusive lock on ``locks/cursors.lock`` (never deleted or replaced),
2. re-reads ``cursors.json`` inside the lock,
3. changes only the caller's section,
4. writes a uniquely named temp file in the same folder, fsyncs it,
   ``os.replace``-s it over the target and fsyncs the folder,
5. unlocks.

So pollers saving in the same second never erase each other's progress. A
missing file is empty. An unreadable or corrupt file raises
:class:`~memex.errors.StateError` naming it and is never treated as empty
(that would re-ingest everything) and never overwritten.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memex.errors import CursorConflict, StateError
from memex.state.files import atomic_replace, ensure_private_dir
from memex.state.locks import exclusive

FORMAT = 1
FILE_NAME = "cursors.json"
LOCK_NAME = "cursors.lock"

Section = dict[str, Any]


def utc_now() -> str:
    """The current time as RFC 3339 UTC with a ``Z`` suffix."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class CursorEdits:
    """``advance`` and ``set_cursor``, written once over a store's ``update`` (local file or S3)."""

    def update(self, source: str, change: Callable[[Section], Section]) -> Section:
        """Apply ``change`` to ``source``'s section atomically (each store does it its own way)."""
        raise NotImplementedError

    def where(self, source: str) -> str:
        """Where ``source``'s section is kept, for messages."""
        raise NotImplementedError

    def advance(self, source: str, expected: Any, new: Any, *, positions: dict[str, int] | None = None) -> None:
        """Move the live cursor from ``expected`` to ``new`` (compare-and-swap).

        Raises :class:`CursorConflict` if the stored cursor is no longer
        ``expected`` (it was set or reset while the poll ran): the poll's view
        is stale and writing would undo that change.
        """

        def change(section: Section) -> Section:
            current = section.get("cursor")
            if current != expected:
                raise CursorConflict(
                    f"{self.where(source)}: cursor of {source!r} changed while the poll ran "
                    f"(expected {json.dumps(expected)}, found {json.dumps(current)}); not saving, the next poll resumes from it"
                )
            section["cursor"] = new
            section["cursor_updated_at"] = utc_now()
            if positions is not None:
                section["positions"] = positions
            return section

        self.update(source, change)

    def set_cursor(self, source: str, cursor: Any, *, reason: str, positions: dict[str, int] | None = None) -> Section:
        """Set (or with None, clear) the live cursor unconditionally: the explicit, logged way back."""

        def change(section: Section) -> Section:
            if cursor is None:
                section.pop("cursor", None)
                section.pop("positions", None)
            else:
                section["cursor"] = cursor
                if positions is not None:
                    section["positions"] = positions
            section["cursor_updated_at"] = utc_now()
            section["cursor_set_reason"] = reason
            return section

        return self.update(source, change)


class CursorStore(CursorEdits):
    """Read and change per-source sections of ``<state_dir>/cursors.json``."""

    def __init__(self, state_dir: Path, lock_timeout: float = 10.0) -> None:
        self.state_dir = state_dir
        self.path = state_dir / FILE_NAME
        self.lock_path = state_dir / "locks" / LOCK_NAME
        self.lock_timeout = lock_timeout

    # -- reading -----------------------------------------------------------
    def load(self) -> dict[str, Section]:
        """Return every source's section. Readers need no lock: the file is only ever replaced whole."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            from memex.fs_errors import explain

            raise (explain(exc) or StateError(f"cannot read ({exc.strerror})", path=self.path)) from None
        return _parse(raw, self.path)

    def section(self, source: str) -> Section:
        """Return one source's section (empty if it has none yet)."""
        return self.load().get(source, {})

    def cursor(self, source: str) -> Any:
        """Return the live cursor of ``source``, or None before its first poll."""
        return self.section(source).get("cursor")

    # -- changing ----------------------------------------------------------
    def update(self, source: str, change: Callable[[Section], Section]) -> Section:
        """Apply ``change`` to ``source``'s section under the lock and save durably.

        ``change`` gets a private copy of the section as it is on disk now and
        returns the new section. Other sections are written back exactly as
        they were read inside the lock.
        """
        ensure_private_dir(self.state_dir)
        ensure_private_dir(self.lock_path.parent)
        with exclusive(self.lock_path, self.lock_timeout):
            sources = self.load()
            before = sources.get(source, {})
            after = change(copy.deepcopy(before))
            if after == before:
                return after
            sources[source] = after
            doc = {"format": FORMAT, "sources": sources}
            data = json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False).encode() + b"\n"
            atomic_replace(self.path, data)
            return after

    def where(self, source: str) -> str:
        """The cursors file (every source's section is in it)."""
        return str(self.path)


def _parse(raw: bytes, path: Path) -> dict[str, Section]:
    """Validate the document and return its sources map, or raise StateError."""
    hint = "restore it from a backup or move it aside; memex will not overwrite it"
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateError(f"corrupt cursors file ({exc.__class__.__name__} at byte {getattr(exc, 'pos', '?')}); {hint}", path=path) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("sources"), dict):
        raise StateError(f"not a memex cursors file (no 'sources' table); {hint}", path=path)
    if doc.get("format") != FORMAT:
        raise StateError(f"unknown cursors format {doc.get('format')!r} (this memex reads {FORMAT}); upgrade memex", path=path)
    sources: dict[str, Section] = doc["sources"]
    for name, section in sources.items():
        if not isinstance(section, dict):
            raise StateError(f"section {name!r} is not an object; {hint}", path=path)
    return sources
