"""Signal group names, from the group itself: signal-cli's list of groups, never the name of whoever sent a message.

signal-cli's receive output names a group in ``groupInfo.groupName``, but not always (0.13.x leaves it out); the
sender's ``sourceName`` is a person, not the group. A group ID without a name is looked up with
``signal-cli -o json listGroups`` (a JSON array of ``{"id", "name", ...}``, ``ListGroupsCommand``), at most once per
poll and only when an ID is new; names are remembered in ``<spool>/groups.json`` (0600). A group whose name is
still unknown is named by its ID.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memex.plugin import atomic_replace, ensure_private_dir

GROUPS = "groups.json"
Lookup = Callable[[], dict[str, str] | None]  # every group signal-cli knows, by ID (None: could not ask)


def read_map(path: Path) -> dict[str, str]:
    """A JSON object of strings kept in ``path`` (empty when it is missing or unreadable: a cache, rebuilt as used)."""
    try:
        loaded = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def parse_list(raw: bytes) -> dict[str, str]:
    """``listGroups -o json`` output as {group ID: name} (groups without a name left out); ValueError if not its shape."""
    doc: Any = json.loads(raw)
    if not isinstance(doc, list):
        raise ValueError("not a JSON array")
    return {str(g["id"]): str(g["name"]) for g in doc if isinstance(g, dict) and g.get("id") and g.get("name")}


class GroupNames:
    """Names of groups by ID, kept in ``<root>/groups.json``; ``lookup`` is asked at most once (per poll)."""

    def __init__(self, root: Path, lookup: Lookup) -> None:
        self.root = root
        self.lookup = lookup
        self._names: dict[str, str] | None = None
        self._changed = False
        self._asked = False

    def _load(self) -> dict[str, str]:
        if self._names is None:
            self._names = read_map(self.root / GROUPS)
        return self._names

    def name(self, group_id: str, given: Any = None) -> str:
        """The group's name: the one the envelope gives (remembered), else the one remembered, else signal-cli's
        (asked once), else the group ID itself."""
        names = self._load()
        if isinstance(given, str) and given:
            self._set(group_id, given)
            return given
        if group_id not in names and not self._asked:
            self._asked = True
            for gid, found in (self.lookup() or {}).items():
                self._set(gid, found)
        return names.get(group_id) or group_id

    def _set(self, group_id: str, name: str) -> None:
        names = self._load()
        if names.get(group_id) != name:
            names[group_id] = name
            self._changed = True

    def save(self) -> None:
        """Write the names if they changed."""
        if self._names is not None and self._changed:
            ensure_private_dir(self.root)
            atomic_replace(self.root / GROUPS, json.dumps(self._names, ensure_ascii=False).encode())
            self._changed = False
