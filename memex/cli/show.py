"""``memex show`` (one message, its revisions and attachments, read from the store) and ``memex index status``:
what the read model (:mod:`memex.read`) answers, as text."""

from __future__ import annotations

from typing import Any

from memex.config import Config
from memex.observe.safe_text import visible
from memex.read.show import _archive, conversation, find, revisions
from memex.search import index_path, journal_keys, journal_path
from memex.store.objects import ObjectStore

__all__ = ["conversation", "find", "human", "revisions", "status_rows", "status_table"]


def when(value: Any) -> str:
    """A record's RFC 3339 time in one format whatever its source wrote (``Z`` or an offset, microseconds or none): UTC
    to the second, ``2024-03-01 09:30:00Z``, as ``memex status`` and ``memex tail`` write times (``--json`` keeps the
    record's own). A time without a zone is taken as UTC; anything unreadable is shown as it is, none as ``?``."""
    if not isinstance(value, str) or not value:
        return "?"
    from datetime import UTC, datetime

    try:
        at = datetime.fromisoformat(value)
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    except (ValueError, OverflowError):
        return value


def human(key: str, doc: dict[str, Any], revs: list[tuple[str, dict[str, Any]]]) -> str:
    """The message as text: its header lines, attachments, text, then each revision.

    Every field is shown through :func:`memex.observe.safe_text.visible` (a header on its one line, a text over its
    lines), so nothing a mail carries reaches the terminal as a control.
    """
    conv, sender, extra = doc.get("conversation") or {}, doc.get("sender") or {}, doc.get("extra") or {}
    who = " ".join(x for x in (sender.get("name"), f"<{sender.get('id')}>" if sender.get("id") else None) if x) or "?"
    head = [("key", key), ("source", doc.get("source")), ("native id", doc.get("native_id")), ("sent", when(doc.get("sent_at"))),
            ("conversation", f"{conv.get('name') or '-'} ({conv.get('id') or '-'})"),
            ("from", f"{who}{' (me)' if sender.get('is_me') else ''}")]  # fmt: skip
    if extra.get("subject"):
        head.append(("subject", extra["subject"]))
    if doc.get("deleted"):
        head.append(("deleted", "yes"))
    for att in doc.get("attachments") or []:
        size = f", {att['size']:,} bytes" if isinstance(att.get("size"), int) else ""
        missing = ", bytes missing" if att.get("missing") else ""
        head.append(("attachment", f"{att.get('filename') or att.get('id')} ({att.get('mime_type') or '?'}{size}{missing})"))
    lines = [f"{name + ':':<13} {visible(value)}" for name, value in head]
    lines += ["", visible(doc.get("text") or "(no text)", multiline=True)]
    if revs:
        lines += ["", f"revisions ({len(revs)}):"]
        for _k, rev in revs:
            meta = rev.get("revision") or {}
            body = "" if meta.get("kind") == "reactions" else f": {visible(rev.get('text') or '(no text)', multiline=True)}"
            lines.append(f"  {visible(when(meta.get('at')))}  {visible(meta.get('kind'))}{body}")
    return "\n".join(lines)


def status_rows(cfg: Config, store: ObjectStore) -> list[dict[str, Any]]:
    """Per source (configured or indexed): indexed, edited, deleted, in the store, behind, pending, last added/rebuilt."""
    indexed: dict[str, dict[str, Any]] = {}
    archive = _archive(cfg, store)
    if index_path(cfg.state_dir).exists():
        indexed = archive.index_counts()
    rows = []
    for source in sorted(set(cfg.sources) | set(indexed)):
        entry = indexed.get(source, {"indexed": 0, "deleted": 0, "edited": 0, "added_at": None, "rebuilt_at": None})
        in_store = archive.store_count(source)
        pending = sum(len(journal_keys(journal_path(cfg.state_dir, source, w))) for w in ("poll", "backfill"))
        rows.append({"source": source, **entry, "in_store": in_store, "behind": max(0, in_store - entry["indexed"]), "pending": pending})
    return rows


def status_table(rows: list[dict[str, Any]]) -> str:
    """The rows as an aligned table."""
    head = ("source", "indexed", "edited", "deleted", "in store", "behind", "pending", "last added", "rebuilt")
    body = [(visible(r["source"]), str(r["indexed"]), str(r["edited"]), str(r["deleted"]), str(r["in_store"]), str(r["behind"]),
             str(r["pending"]), visible(r.get("added_at") or "-"), visible(r.get("rebuilt_at") or "-")) for r in rows]  # fmt: skip
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=False)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=False)).rstrip() for line in (head, *body))
