"""``memex verify`` for Messenger (:class:`memex.capabilities.Inventoried`): the messages of the exports the cursor has read.

The exports compared are those of the cursor's ``done`` (read to the end) and the one being read (``at``: its thread
units before the cursor's, and the items of the cursor's unit up to its count). Each is found in the inbox by its
signature, else by its content hash (a copy, a rename); one that is no longer in the inbox is reported
(:class:`~memex.source.Unchecked`: the index may well hold it, there is nothing left to compare it with), never an
error. A message that is in several exports (each download holds the whole history) is listed once. Originals are
listed (and records that could not be parsed, which are quarantined): an unsent message is only a ``delete``
revision, with no original to look for, and reactions are revisions of a listed original.

A ref is ``<export name>!<thread unit>#<n>``: the n-th item of the unit, counted as the cursor counts them.
``reread`` renders those units again from the export and yields each item named, with the revisions of the same
message that follow it (its reactions), exactly as a poll renders them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memex.plugin import Cursor, Item, Listed, Unchecked
from pollers.messenger.exports import Candidate, Opened, Unit, scan


class Inventory:
    """The messages of the exports a cursor has read, and messages rendered again (mixed into the poller)."""

    if TYPE_CHECKING:  # what the poller provides
        name: str
        inbox: Path

        def _open(self, cand: Candidate) -> Opened | None: ...

        def _numbered(self, opened: Opened, unit: Unit, floor_ms: int = 0) -> Iterator[tuple[int, Item]]: ...

    _inventory_floor_ms = 0  # the cursor's floor_ms (start = "now"), kept for reread: items are counted above it

    def inventory(self, cursor: Cursor) -> Iterator[Listed | Unchecked]:
        """``Listed(native ID, ref)`` of every message of the exports read up to the cursor, export by export."""
        cur: dict[str, Any] = cursor or {}
        floor = self._inventory_floor_ms = int(cur.get("floor_ms", 0))
        wanted: dict[str, list[str]] = {}  # content hash -> its signatures, in the cursor's order
        for export_hash, signature in cur.get("done") or []:
            wanted.setdefault(export_hash, []).append(signature)
        at = cur.get("at")
        partial = at["export"] if at and at["export"] not in wanted else None
        if partial is not None:
            wanted[partial] = []
        found = self._exports(wanted)
        seen: set[str] = set()
        for export_hash, signatures in wanted.items():
            opened = found.get(export_hash)
            if opened is None:
                yield Unchecked(f"export {describe(export_hash, signatures)} no longer in {self.inbox}; cannot be checked")
                continue
            stop = (str(at["unit"]), int(at["n"])) if export_hash == partial and at else None
            for unit in opened.layout.units:
                if stop is not None and unit.key > stop[0]:
                    break
                for n, item in self._numbered(opened, unit, floor):
                    if stop is not None and unit.key == stop[0] and n > stop[1]:
                        break
                    native_id = listed_id(item)
                    if native_id is not None and native_id not in seen:
                        seen.add(native_id)
                        yield Listed(native_id, f"{opened.reader.label}!{unit.key}#{n}")

    def reread(self, refs: list[str]) -> Iterator[Item]:
        """The items at ``refs`` (and the revisions of the same message after each), rendered again; exports gone are skipped."""
        candidates = sorted(scan(self.inbox, 0)[0], key=lambda c: -len(c.path.name))  # "a!b.zip" before "a"
        by_export: dict[str, dict[str, set[int]]] = {}
        chosen: dict[str, Candidate] = {}
        for ref in refs:
            cand = next((c for c in candidates if ref.startswith(c.path.name + "!")), None)
            unit_key, _, count = ref[len(cand.path.name) + 1 :].rpartition("#") if cand is not None else ("", "", "")
            if cand is None or not count.isdigit():
                continue
            chosen[cand.path.name] = cand
            by_export.setdefault(cand.path.name, {}).setdefault(unit_key, set()).add(int(count))
        for label, units in sorted(by_export.items()):
            opened = self._open(chosen[label])
            if opened is None:
                continue
            for unit in opened.layout.units:
                numbers = units.get(unit.key)
                if not numbers:
                    continue
                following: str | None = None  # the native ID whose revisions are still coming
                for n, item in self._numbered(opened, unit, self._inventory_floor_ms):
                    message = item.message
                    if n in numbers:
                        following = listed_id(item)
                        yield item
                    elif following is not None and message is not None and message.revision is not None and message.native_id == following:
                        yield item
                    else:
                        following = None

    def _exports(self, wanted: dict[str, list[str]]) -> dict[str, Opened]:
        """The exports of ``wanted`` (content hash -> signatures) still in the inbox: by signature, else by content hash."""
        found: dict[str, Opened] = {}
        candidates = scan(self.inbox, 0)[0]  # settled or not: an export read before is looked for wherever it is
        by_signature = {s: h for h, sigs in wanted.items() for s in sigs}
        rest: list[Candidate] = []
        for cand in candidates:
            export_hash = by_signature.get(cand.signature)
            if export_hash is None or export_hash in found:
                rest.append(cand)
                continue
            opened = self._open(cand)
            if opened is not None and opened.hash == export_hash:
                found[export_hash] = opened
            else:
                rest.append(cand)
        for cand in rest:  # moved, copied or renamed: its signature changed; only its content hash can tell
            if len(found) == len(wanted):
                break
            opened = self._open(cand)
            if opened is not None and opened.hash in wanted and opened.hash not in found:
                found[opened.hash] = opened
        return found


def listed_id(item: Item) -> str | None:
    """The native ID ``memex verify`` looks for: an original's, or a quarantined record's; None for a revision."""
    if item.failure is not None:
        return item.failure.native_id
    if item.message is not None and item.message.revision is None:
        return item.message.native_id
    return None


def describe(export_hash: str, signatures: list[str]) -> str:
    """An export gone from the inbox, as the cursor knows it: its content hash, and a zip's size and time."""
    for signature in signatures:
        kind, _, rest = signature.partition(":")
        size, _, mtime_ns = rest.partition(":")
        if kind == "zip" and size.isdigit() and mtime_ns.isdigit():
            when = datetime.fromtimestamp(int(mtime_ns) / 1e9, UTC).strftime("%Y-%m-%d %H:%M UTC")
            return f"{export_hash[:12]} (a zip of {int(size):,} bytes, modified {when})"
    return f"{export_hash[:12]} (a folder)" if signatures else export_hash[:12]
