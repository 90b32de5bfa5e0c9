"""``memex show`` (one message, its revisions and attachments, read from the store) and ``memex index status``."""

from __future__ import annotations

import json
from typing import Any

from memex.config import Config
from memex.errors import ConfigError, StateError
from memex.records import message_key
from memex.safe_text import visible
from memex.search import index_path, journal_path
from memex.search.build import journal_keys, store_counts
from memex.search.index import SearchIndex
from memex.search.rows import revision_parent
from memex.store.objects import ObjectStore


def _load(store: ObjectStore, key: str) -> dict[str, Any] | None:
    body = store.get(key)
    if body is None:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        raise StateError("the stored object is not JSON; `memex verify --repair` replaces a damaged one", path=key) from None
    return doc if isinstance(doc, dict) else None


def find(cfg: Config, store: ObjectStore, ref: str) -> tuple[str, dict[str, Any]]:
    """The key and record ``ref`` names: a key (``messages/...json``, or a revision's, meaning its message), or a native ID.

    A native ID is looked up in the search index when there is one, else at its key in each configured source.
    """
    if ref.startswith(("messages/", "revisions/")) and ref.endswith(".json"):
        key = revision_parent(ref) or ref
        doc = _load(store, key)
        if doc is None:
            raise ConfigError(f"{key}: not in the store; check the key (`memex search --json` lists keys)")
        return key, doc
    keys: list[str] = []
    if index_path(cfg.state_dir).exists():
        with SearchIndex.open(cfg.state_dir, create=False) as index:
            keys = index.keys_for(ref)
    if not keys:
        keys = [k for k in (message_key(source, ref) for source in sorted(cfg.sources)) if store.exists(k)]
    if not keys:
        raise ConfigError(f"no stored message has the native ID {ref!r}; give a key or a native ID (`memex search --json` lists both)")
    if len(keys) > 1:
        raise ConfigError(f"{len(keys)} messages have the native ID {ref!r} ({', '.join(keys[:5])}); give one of their keys")
    doc = _load(store, keys[0])
    if doc is None:
        raise ConfigError(f"{keys[0]}: indexed but not in the store; `memex index rebuild` brings the index in step")
    return keys[0], doc


def conversation(
    cfg: Config, store: ObjectStore, key: str, doc: dict[str, Any]
) -> list[tuple[str, dict[str, Any], list[tuple[str, dict[str, Any]]]]]:
    """Every message of the conversation of the message at ``key`` (its record ``doc``), oldest first, each with its
    revisions, read from the store (the index says which: :func:`memex.search.threads.thread_keys`). A message the
    index lists but the store lacks is left out; one the index lacks (not indexed yet) is shown alone."""
    from memex.search.threads import thread_keys

    if not index_path(cfg.state_dir).exists():
        raise StateError("no search index yet, and --thread needs it; build it with `memex index rebuild`", path=index_path(cfg.state_dir))
    with SearchIndex.open(cfg.state_dir, create=False) as index:
        keys = thread_keys(index, key) or [key]
    out = []
    for k in keys:
        found = doc if k == key else _load(store, k)
        if found is not None:
            out.append((k, found, revisions(store, k)))
    return out


def revisions(store: ObjectStore, key: str) -> list[tuple[str, dict[str, Any]]]:
    """The revisions stored for the message at ``key``, oldest first."""
    parts = key[: -len(".json")].split("/")
    out = []
    for rev_key in store.list_keys(f"revisions/{parts[1]}/{parts[2]}/"):
        doc = _load(store, rev_key)
        if doc is not None:
            out.append((rev_key, doc))
    return sorted(out, key=lambda kv: (str((kv[1].get("revision") or {}).get("at") or ""), kv[0]))


def human(key: str, doc: dict[str, Any], revs: list[tuple[str, dict[str, Any]]]) -> str:
    """The message as text: its header lines, attachments, text, then each revision.

    Every field is shown through :func:`memex.safe_text.visible` (a header on its one line, a text over its
    lines), so nothing a mail carries reaches the terminal as a control.
    """
    conv, sender, extra = doc.get("conversation") or {}, doc.get("sender") or {}, doc.get("extra") or {}
    who = " ".join(x for x in (sender.get("name"), f"<{sender.get('id')}>" if sender.get("id") else None) if x) or "?"
    head = [("key", key), ("source", doc.get("source")), ("native id", doc.get("native_id")), ("sent", doc.get("sent_at") or "?"),
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
            lines.append(f"  {visible(meta.get('at') or '?')}  {visible(meta.get('kind'))}{body}")
    return "\n".join(lines)


def status_rows(cfg: Config, store: ObjectStore) -> list[dict[str, Any]]:
    """Per source (configured or indexed): indexed, edited, deleted, in the store, behind, pending, last added/rebuilt."""
    indexed: dict[str, dict[str, Any]] = {}
    if index_path(cfg.state_dir).exists():
        with SearchIndex.open(cfg.state_dir, create=False) as index:
            indexed = index.status()
    rows = []
    for source in sorted(set(cfg.sources) | set(indexed)):
        entry = indexed.get(source, {"indexed": 0, "deleted": 0, "edited": 0, "added_at": None, "rebuilt_at": None})
        in_store = store_counts(store, source)
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
