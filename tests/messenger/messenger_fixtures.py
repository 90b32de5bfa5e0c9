"""Messenger exports generated in the real formats, for the tests and the benchmark.

The standard export ("Download Your Information", JSON) writes every UTF-8 byte of a string as its own
``\\u00XX`` escape: reproduced with :func:`fb` (UTF-8 bytes read as latin-1) and ``json.dumps`` (which
escapes everything above ASCII). Field names follow the export (``participants[{name}]``, ``title``,
``thread_path``, messages of ``sender_name``, ``timestamp_ms``, ``content``, ``photos[{uri,
creation_timestamp}]``, ``reactions[{reaction, actor}]``, ``is_unsent``), newest message first,
``message_1.json`` the newest file. The encrypted-chat export is one JSON file per thread at its root
(``participants`` as strings, ``threadName``, messages of ``senderName``, ``text``, ``timestamp``,
``media[{uri}]``, ``reactions``, ``isUnsent``, ``type``) with media under ``media/``.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ME = "Zoë Müller"
ALICE = "Alice Ångström 🎉"
T0 = 1_700_000_000_000


def fb(text: str) -> str:
    """Facebook's mojibake: each UTF-8 byte as one character."""
    return text.encode("utf-8").decode("latin-1")


def msg(
    sender: str,
    ts: int,
    text: str | None = None,
    *,
    photos: Sequence[str] = (),
    reactions: Sequence[tuple[str, str]] = (),
    unsent: bool = False,
) -> dict[str, Any]:
    """One message as the standard export writes it (not yet escaped: :func:`encode` does that)."""
    m: dict[str, Any] = {"sender_name": sender, "timestamp_ms": ts}
    if text is not None and not unsent:
        m["content"] = text
    if photos:
        m["photos"] = [{"uri": u, "creation_timestamp": ts // 1000} for u in photos]
    if reactions:
        m["reactions"] = [{"reaction": r, "actor": a} for a, r in reactions]
    m["is_geoblocked_for_viewer"] = False
    m["is_unsent"] = unsent
    return m


def _mangle(value: Any) -> Any:
    if isinstance(value, str):
        return fb(value)
    if isinstance(value, list):
        return [_mangle(v) for v in value]
    if isinstance(value, dict):
        return {k: (_mangle(v) if k != "uri" else v) for k, v in value.items()}
    return value


@dataclass
class Thread:
    """One thread of a standard export."""

    folder: str
    participants: list[str]
    messages: list[dict[str, Any]]  # any order; written newest first
    title: str | None = None
    section: str = "inbox"
    per_file: int = 10000


@dataclass
class Export:
    """A standard export's files; ``media`` maps paths inside the export to their bytes."""

    threads: list[Thread]
    new_layout: bool = False
    media: dict[str, bytes] = field(default_factory=dict)
    extra: dict[str, bytes] = field(default_factory=dict)

    def root(self) -> str:
        """Where ``messages/`` is."""
        return "your_facebook_activity/messages" if self.new_layout else "messages"

    def files(self) -> dict[str, bytes]:
        """Every file of the export."""
        out: dict[str, bytes] = {}
        for t in self.threads:
            ordered = sorted(t.messages, key=lambda m: -m["timestamp_ms"])
            chunks = [ordered[i : i + t.per_file] for i in range(0, len(ordered), t.per_file)] or [[]]
            for n, chunk in enumerate(chunks, start=1):
                doc = {
                    "participants": [{"name": fb(p)} for p in t.participants],
                    "messages": [_mangle(m) for m in chunk],
                    "title": fb(t.title or t.participants[0]),
                    "is_still_participant": True,
                    "thread_path": f"{t.section}/{t.folder}",
                    "magic_words": [],
                }
                out[f"{self.root()}/{t.section}/{t.folder}/message_{n}.json"] = json.dumps(doc, indent=2).encode()
        out.update(self.media)
        out.update(self.extra)
        return out


def e2ee_files(threads: dict[str, tuple[list[str], list[dict[str, Any]]]], media: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """An encrypted-chat export: ``{file name: (participants, messages)}``; messages as from :func:`e2ee_msg`."""
    out = {
        name: json.dumps({"participants": people, "threadName": name.removesuffix(".json"), "messages": msgs}, ensure_ascii=False).encode()
        for name, (people, msgs) in threads.items()
    }
    out.update(media or {})
    return out


def e2ee_msg(
    sender: str, ts: int, text: str = "", *, media: Sequence[str] = (), reactions: Sequence[tuple[str, str]] = (), unsent: bool = False
) -> dict[str, Any]:
    """One message of the encrypted-chat export."""
    return {
        "isUnsent": unsent,
        "media": [{"uri": u} for u in media],
        "reactions": [{"actor": a, "reaction": r} for a, r in reactions],
        "senderName": sender,
        "text": text,
        "timestamp": ts,
        "type": "media" if media else "text",
    }


def write_zip(path: Path, files: dict[str, bytes]) -> Path:
    """Zip ``files`` to ``path`` (written beside, then renamed in: a finished download)."""
    tmp = path.with_name("." + path.name + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in files.items():
            zf.writestr(name, body)
    tmp.rename(path)
    return path


def write_dir(path: Path, files: dict[str, bytes]) -> Path:
    """Unpack ``files`` under ``path``."""
    for name, body in files.items():
        full = path / name
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(body)
    return path
