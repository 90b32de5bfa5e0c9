"""What ``memex show`` reads: the message a reference names (its key, a revision's, or a native ID), its record and
revisions from the store, and with ``--thread`` every message of its conversation (the index says which). The
errors are one line each, saying what to give instead (:mod:`memex.cli.show` renders the answers).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memex.config import Config
from memex.errors import ConfigError, StateError
from memex.search import index_path
from memex.store.objects import ObjectStore

if TYPE_CHECKING:
    from memex.read.archive import Archive


def _archive(cfg: Config, store: ObjectStore) -> Archive:
    from memex.read.archive import Archive

    return Archive(cfg, store)


def find(cfg: Config, store: ObjectStore, ref: str) -> tuple[str, dict[str, Any]]:
    """The key and record ``ref`` names: a key (``messages/...json``, or a revision's, meaning its message), or a native ID.

    A native ID is looked up in the search index when there is one, else at its key in each configured source
    (:meth:`memex.read.archive.Archive.resolve`).
    """
    archive = _archive(cfg, store)
    keys = archive.resolve(ref)
    if ref.startswith(("messages/", "revisions/")) and ref.endswith(".json"):
        doc = _load(store, keys[0])
        if doc is None:
            raise ConfigError(f"{keys[0]}: not in the store; check the key (`memex search --json` lists keys)")
        return keys[0], doc
    if not keys:
        raise ConfigError(f"no stored message has the native ID {ref!r}; give a key or a native ID (`memex search --json` lists both)")
    if len(keys) > 1:
        raise ConfigError(f"{len(keys)} messages have the native ID {ref!r} ({', '.join(keys[:5])}); give one of their keys")
    doc = _load(store, keys[0])
    if doc is None:
        raise ConfigError(f"{keys[0]}: indexed but not in the store; `memex index rebuild` brings the index in step")
    return keys[0], doc


def _load(store: ObjectStore, key: str) -> dict[str, Any] | None:
    """The record at ``key`` (None when absent); a stored object that is not JSON is a StateError."""
    body = store.get(key)
    if body is None:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        raise StateError("the stored object is not JSON; `memex verify --repair` replaces a damaged one", path=key) from None
    return doc if isinstance(doc, dict) else None


def conversation(
    cfg: Config, store: ObjectStore, key: str, doc: dict[str, Any]
) -> list[tuple[str, dict[str, Any], list[tuple[str, dict[str, Any]]]]]:
    """Every message of the conversation of the message at ``key`` (its record ``doc``), oldest first, each with its
    revisions, read from the store (the index says which: :meth:`memex.read.archive.Archive.thread_keys`). A message
    the index lists but the store lacks is left out; one the index lacks (not indexed yet) is shown alone."""
    if not index_path(cfg.state_dir).exists():
        raise StateError("no search index yet, and --thread needs it; build it with `memex index rebuild`", path=index_path(cfg.state_dir))
    archive = _archive(cfg, store)
    keys = archive.thread_keys(key) or [key]
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
