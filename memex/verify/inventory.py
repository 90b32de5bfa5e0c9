"""The source side of ``memex verify``: what a source has up to its cursor that the index lacks, and ``--repair``.

A poller that can list its source cheaply (:class:`memex.capabilities.Inventoried`: iMessage, Maildir, mbox, IMAP, Messenger) is
asked for every message up to the saved cursor; each one must be stored (or quarantined). A part of the source it
cannot list (a renumbered mailbox, an export gone from the folder) is reported as ``unchecked``, not as damage. With
``--repair`` the missing ones, and those whose objects the walk found damaged, are read again from the source:
missing ones are stored through the uploader's create-only path (exactly as a poll would), damaged ones replaced by
:meth:`~memex.store.objects.ObjectStore.replace_damaged` after checking they are still damaged. A source whose
revisions are whole messages (``whole_revisions``: Teams) has a revision without its original healed from the index
itself: its earliest revision's record, without ``revision``, is stored as the original (create-only), as a poll
would (:func:`originals_from_revisions`). Nothing is deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memex.capabilities import capabilities
from memex.config import Config
from memex.records import canonical_json, encode_id, message_key, revision_key
from memex.registry import open_poller
from memex.source import Item, Listed, Unchecked
from memex.store.attachments import store_content
from memex.store.objects import ObjectStore
from memex.verify.checks import KEY_MISMATCH, MISSING, ORPHAN_REVISION, record_problem
from memex.verify.report import ATTACHMENTS, Report, SourceReport
from memex.verify.walk import Reader, Seen, ordered_map

REREAD_BATCH = 200


def compare(cfg: Config, store: ObjectStore, report: Report, name: str, *, cursor: Any, repair: bool,
            damaged: dict[str, Seen], pool: ThreadPoolExecutor | None, window: int) -> None:  # fmt: skip
    """Compare source ``name`` up to ``cursor`` with the index; with ``repair``, re-read what is missing or damaged."""
    part = report.source(name)
    conf = cfg.source(name)
    with open_poller(conf) as poller:
        can = capabilities(poller)
        if repair and can.whole_revisions:  # memex.capabilities.WholeRevisions
            damaged = originals_from_revisions(cfg, store, name, part, damaged)
        inventory, reread = can.inventory, can.reread  # memex.capabilities.Inventoried
        if inventory is None or reread is None:
            part.inventory = "index-only"
            _not_repairable(part, damaged, f"sources of type {conf.type!r} cannot be re-read by verify; `memex backfill "
                                           f"{name} --rewrite` stores again what the source still has")  # fmt: skip
            return
        if conf.start == "now":
            part.inventory = 'start = "now" (history before the start is not expected)'
        elif cursor is None:
            part.inventory = "no cursor yet (nothing polled)"
        else:
            from memex.live_cursor import refuse_bad_stored
            from memex.state.backend import cursor_store

            refuse_bad_stored(poller, can, name, cursor, cursor_store(cfg).where(name))  # edited by hand: one line, not a crash
            part.inventory = "checked"
        fixer = Fixer(cfg, store, name, part, damaged) if repair else None
        wanted = {s.where.native_id for s in damaged.values() if s.where.native_id is not None and s.problem}
        wanted.discard(None)
        listing = _listed(inventory(cursor), part) if part.inventory == "checked" else iter(())
        reader = Reader(store)
        rereads: list[str] = []

        def present(entry: Listed) -> tuple[bool, list[str]]:
            """Whether the message is stored (or quarantined), and the ids of its listed revisions that are not."""
            key = message_key(name, entry.native_id)
            if not (reader.has(key) or reader.has(f"quarantine/{encode_id(name)}/{encode_id(entry.native_id)}.json")):
                return False, []
            return True, [r for r in entry.revisions or () if not reader.has(revision_key(name, entry.native_id, r))]

        for entry, (found, lost) in ordered_map(present, listing, pool, window):
            part.listed += 1
            if not found:
                part.add(MISSING, {"native_id": entry.native_id, "ref": entry.ref})
            for revision in lost:  # a revision the source still has (an edit, an unsend) that the store lacks
                part.add(MISSING, {"native_id": entry.native_id, "ref": entry.ref, "revision": revision})
            if fixer is not None and (not found or lost or entry.native_id in wanted):
                rereads.append(entry.ref)
                if len(rereads) >= REREAD_BATCH:
                    fixer.store_items(reread(rereads))
                    rereads = []
        if fixer is not None:
            if rereads:
                fixer.store_items(reread(rereads))
            fixer.finish()


def _listed(entries: Iterator[Listed | Unchecked], part: SourceReport) -> Iterator[Listed]:
    """The messages of an inventory; each part the source could not list goes to the report (``unchecked``)."""
    for entry in entries:
        if isinstance(entry, Unchecked):
            part.unchecked.append(entry.why)
        else:
            yield entry


def originals_from_revisions(cfg: Config, store: ObjectStore, name: str, part: SourceReport, damaged: dict[str, Seen]) -> dict[str, Seen]:
    """Store each missing original of a source whose revisions are whole messages (``whole_revisions``), create-only.

    The original is its earliest revision's record without ``revision``: what the uploader stores when a whole
    revision finds its original missing (:meth:`memex.uploader.Uploader.put`), so a repair and a later poll agree.
    Returns the damaged objects that are left.
    """
    from memex.observe.logs import config_logger

    orphans: dict[str, list[str]] = {}  # original -> its revisions
    for key, seen in damaged.items():
        if seen.problem and seen.problem[0] == ORPHAN_REVISION and seen.where.parent is not None:
            orphans.setdefault(seen.where.parent, []).append(key)
    log = config_logger(cfg, name) if orphans else None
    healed: set[str] = set()
    for parent, keys in orphans.items():
        docs = [(str((doc.get("revision") or {}).get("at") or ""), key, doc) for key in keys if (doc := _json(store.get(key)))]
        if not docs:
            continue
        _, earliest, doc = min(docs, key=lambda d: (d[0], d[1]))
        body = canonical_json({k: v for k, v in doc.items() if k != "revision"})
        if record_problem(parent, body) is None and (store.put_new(parent, body) or store.exists(parent)):
            healed.update(keys)
            part.repaired["originals from revisions"] = part.repaired.get("originals from revisions", 0) + 1
            if log is not None:
                log.warning("object.restored", key=parent, from_revision=earliest)
    if healed:
        store.sync()
    return {k: s for k, s in damaged.items() if k not in healed}


def _json(body: bytes | None) -> dict[str, Any] | None:
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _not_repairable(part: SourceReport, damaged: dict[str, Seen], why: str) -> None:
    if damaged:
        part.not_repaired.append(f"{len(damaged)} damaged objects: {why}")


def attachments_not_repairable(report: Report) -> None:
    """Damaged attachments are reported, never replaced: their bytes are kept for a person to look at."""
    part = report.sources.get(ATTACHMENTS)
    if part is not None and part.damaged:
        part.not_repaired.append(f"{part.damaged} attachments: not repairable by verify (content-addressed and create-only; the "
                                 "damaged bytes are kept as they are for you to inspect)")  # fmt: skip


class Fixer:
    """Stores what one source re-read: missing objects create-only, damaged ones replaced; counts into the report."""

    def __init__(self, cfg: Config, store: ObjectStore, name: str, part: SourceReport, damaged: dict[str, Seen]) -> None:
        from memex.observe.logs import config_logger
        from memex.uploader import Uploader

        self.store = store
        self.part = part
        self.damaged = damaged
        self.log = config_logger(cfg, name)
        self.uploader = Uploader(cfg, name, self.log, store=store)
        self.fixed: set[str] = set()

    def store_items(self, items: Iterator[Item]) -> None:
        """Store each re-read item; then make everything durable.

        A re-read record that breaks the schema goes through the uploader, which quarantines it: a damaged object
        is never replaced by another that is not the schema.
        """
        from memex.uploader import conforms

        for item in items:
            message = item.message
            if message is None:
                if self.uploader.put(item) == "new":
                    self._count("restored")
                continue
            key = message.key()
            blob_keys = {key[: -len(".json")] + suffix: blob for suffix, blob in item.blobs.items()}
            damaged = key in self.damaged or bool(blob_keys.keys() & self.damaged.keys())
            if not damaged or conforms(message)[1] is not None:
                if self.uploader.put(item) == "new":
                    self._count("restored")
                    self.log.warning("object.restored", key=key)
                continue
            for content in item.contents:
                store_content(self.store, content, message.attachments[content.index])
            for blob_key, blob in blob_keys.items():
                if blob_key in self.damaged:
                    self._replace(blob_key, blob, lambda body: bool(body))
                else:
                    self.store.put_new(blob_key, blob)
            if key in self.damaged:
                self._replace(key, message.to_json(), lambda body, key=key: record_problem(key, body) is None)
            elif self.store.put_new(key, message.to_json()):
                self._count("restored")
        self.store.sync()

    def _replace(self, key: str, body: bytes, sound: Any) -> None:
        seen = self.damaged[key]
        current = self.store.get(key)
        if current is not None and sound(current):
            self.fixed.add(key)  # fixed meanwhile (a poll or another verify): nothing left to say about it
            return
        if current == body:  # the source holds exactly these bytes: writing them again cannot help
            self.fixed.add(key)
            self.part.not_repaired.append(f"{key}: the source holds exactly these bytes ({len(body)}), so there is nothing "
                                          "to re-read it from; left as it is")  # fmt: skip
            return
        if seen.problem and seen.problem[0] == KEY_MISMATCH and seen.expected and current:
            self.store.put_new(seen.expected, current)  # the misplaced record keeps a copy at its own name first
        self.store.replace_damaged(key, body)
        self.fixed.add(key)
        self._count("replaced")
        self.log.warning("object.repaired", key=key, damage=seen.problem[0] if seen.problem else None)

    def _count(self, what: str) -> None:
        self.part.repaired[what] = self.part.repaired.get(what, 0) + 1

    def finish(self) -> None:
        """Say what could not be repaired: damaged objects whose message the source no longer has up to the cursor."""
        left = [k for k, s in self.damaged.items() if k not in self.fixed and s.problem and s.problem[0] != ORPHAN_REVISION]
        if left:
            self.part.not_repaired.append(f"{len(left)} damaged objects whose message the source no longer has up to the "
                                          f"cursor (e.g. {left[0]}); left as they are")  # fmt: skip
