"""A cursor changed by hand (``memex cursor set``, ``memex cursor reset``): checked as the source's poller would, then
written under the cursors' lock and logged, as one function any front end calls (the CLI only parses and prints).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memex.capabilities import capabilities
from memex.errors import MemexError
from memex.live_cursor import check_cursor, stored_cursor_positions
from memex.observe.logs import config_logger
from memex.registry import open_poller
from memex.source import Cursor, describe, moved_backward
from memex.state.backend import cursor_store
from memex.state.files import require_state_dir


class CursorNotSet(MemexError):
    """``memex cursor set`` refused a value: one line naming the source and what is wrong with it (exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class CursorChange:
    """What :func:`change_cursor` did: the positions before and after (``{}``: none, the cursor forgotten)."""

    source: str
    reason: str  # "set" or "reset"
    before: dict[str, int]
    after: dict[str, int]

    def line(self) -> str:
        """The one line a front end shows for it: ``imessage: cursor 89636 -> 89000``."""
        return f"{self.source}: cursor {describe(self.before)} -> {describe(self.after)}"


def change_cursor(cfg: Any, source: str, value: Cursor, *, confirm_back: Callable[[str], None] | None = None) -> CursorChange:
    """Set ``source``'s cursor to ``value`` by hand (None: reset it, the next poll reads everything again); what changed.

    The value is checked as the source's poller would (its ``validate_cursor``, then whole, non-negative positions):
    :class:`CursorNotSet` (exit 2) names what is wrong and where the stored one stands. Moving a cursor back calls
    ``confirm_back(what)`` first (None: go ahead), which raises to stop. The change is written under the cursors'
    lock as an explicit ``set`` or ``reset`` (so the dashboard does not flag it) and logged as ``cursor.set`` or
    ``cursor.reset``. Callable without click: the CLI, the tests and any other front end use this one function.
    """
    reason = "reset" if value is None else "set"
    with open_poller(cfg.source(source)) as poller:
        can = capabilities(poller)
        require_state_dir(cfg.state_dir)
        store = cursor_store(cfg)
        before = store.section(source).get("cursor")
        try:
            pos_before = stored_cursor_positions(poller, can, before) if before is not None else {}
        except ValueError:  # edited by hand into a shape the source never writes: setting or resetting it is the way out
            pos_before = {}
        pos_after: dict[str, int] = {}
        if value is not None:
            try:
                pos_after = check_cursor(poller, can, value)
            except ValueError as exc:
                stored = f"; the stored one is at {describe(pos_before)} (memex cursor show {source} --json)" if before is not None else ""
                raise CursorNotSet(f"cursor of {source!r} not set: {exc}{stored}") from None
            if moved_backward(pos_before, pos_after) and confirm_back is not None:
                confirm_back(f"This moves the cursor of {source!r} back ({describe(pos_before)} -> {describe(pos_after)}); the next poll "
                             "re-reads what lies between (stored messages are skipped as duplicates)")  # fmt: skip
    store.set_cursor(source, value, reason=reason, positions=pos_after if value is not None else None)
    config_logger(cfg, source).warning(f"cursor.{reason}", positions_before=pos_before, positions_after=pos_after,
                                       cursor_before=describe(pos_before), cursor_after=describe(pos_after))  # fmt: skip
    return CursorChange(source, reason, pos_before, pos_after)
