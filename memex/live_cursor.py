"""The live cursor's rules: where a ``start = "now"`` source begins, which cursor a poll may save, and which cursor
memex accepts from a person (``memex cursor set``) or from ``cursors.json``.

The poll (:mod:`memex.runner`) uses :func:`start_now` once, for a source without a live cursor;
:func:`trusted_positions` before every cursor write (a refused cursor is never saved; the stored one stays);
:func:`refuse_bad_stored` before it reads a stored cursor. :func:`check_cursor` checks a cursor given by hand
(:mod:`memex.cursor_edit`).
"""

from __future__ import annotations

from typing import Any

from memex.capabilities import Capabilities
from memex.errors import BadCursor, ConfigError, StoredCursorRefused
from memex.source import Cursor, Poller, describe, moved_backward

BACKFILL_KEY = "backfill"  # the backfill's part of a source's cursors section (memex.backfill.checkpoint.SECTION_KEY)


def start_now(section: dict[str, Any], name: str, poller: Poller, can: Capabilities, cursors: Any, log: Any) -> Cursor:
    """Where a ``start = "now"`` source without a live cursor begins; never past a message that was not stored.

    - a source never polled, never reset and never backfilled: at its head (history is left to backfill);
    - after ``cursor reset`` (or set to nothing): from the beginning, as the reset promised;
    - with a backfill checkpoint: where the backfill's walk began (``live_start``, the head the backfill
      recorded before walking), so history and live meet with no gap; from the beginning if the backfill
      recorded none.

    The cursor it starts from is saved first (logged ``cursor.start_now``, ``cursor.start_after_backfill``
    or ``cursor.start_after_reset``); None is the beginning.
    """
    backfill = section.get(BACKFILL_KEY)
    if section.get("cursor_set_reason"):
        log.info("cursor.start_after_reset", reason=section.get("cursor_set_reason"), cursor_after="-")
        return None
    if isinstance(backfill, dict):
        start, event = backfill.get("live_start"), "cursor.start_after_backfill"
    else:
        head = can.head  # memex.capabilities.Headed
        if head is None:
            raise ConfigError('this source\'s type cannot start at "now" (its poller has no head()); use start = "beginning"',
                              key=f"sources.{name}.start")  # fmt: skip
        start, event = head(), "cursor.start_now"
    positions = poller.positions(start) if start is not None else {}
    if start is not None:
        cursors.advance(name, None, start, positions=positions)
    log.info(event, positions_after=positions, cursor_after=describe(positions))
    return start


def trusted_positions(poller: Poller, name: str, committed: Cursor, current: Cursor, *, declared_reset: bool) -> dict[str, int]:
    """The positions of a cursor a poller handed back, or :class:`BadCursor` if memex cannot trust it.

    Every cursor is checked before it is saved: its positions must be computable (a dict of integers), and
    once the source has a stored cursor they may neither vanish nor go backward (unless the poller declared a
    reset in this poll). A refused cursor is never saved; the stored one stays.
    """
    try:
        after = poller.positions(current)
        ok = isinstance(after, dict) and all(isinstance(k, str) and type(v) is int for k, v in after.items())
    except Exception as exc:  # a malformed cursor makes the poller's own code fail
        raise BadCursor(name, f"its positions cannot be computed ({exc.__class__.__name__})") from None
    if not ok:
        raise BadCursor(name, "its positions are not a map of integers")
    if committed is not None:
        before = poller.positions(committed)
        if before and not after:
            raise BadCursor(name, f"it has no positions where the stored one has {describe(before)}")
        back = moved_backward(before, after)
        if back and not declared_reset:
            raise BadCursor(name, f"it goes back from {describe(before)} to {describe(after)} without a declared reset")
    return after


def check_cursor(poller: Poller, can: Capabilities, cursor: Any) -> dict[str, int]:
    """The positions of a cursor given by hand, or ValueError saying what is wrong with it.

    The poller's own ``validate_cursor(cursor) -> str | None`` (if it has one) checks the shape and types;
    then its positions must be computable, non-empty, and integers that are not negative.
    """
    positions = stored_cursor_positions(poller, can, cursor)
    if not positions:
        raise ValueError("not a cursor of this source (it has no positions)")
    return positions


def refuse_bad_stored(poller: Poller, can: Capabilities, name: str, cursor: Any, where: str) -> None:
    """Refuse a stored cursor its poller would not have written (``cursors.json`` edited by hand): one line naming the
    source, what is wrong and the commands that set it right (:class:`~memex.errors.StoredCursorRefused`), before
    anything reads it (a poll, ``memex verify``) and fails on it in a way no one can read."""
    try:
        stored_cursor_positions(poller, can, cursor)
    except ValueError as exc:
        raise StoredCursorRefused(f"the stored cursor of source {name!r} is not one this source writes ({exc}); set a good one with "
                                  f"`memex cursor set {name} VALUE`, or read everything again with `memex cursor reset {name}` "
                                  "(duplicates are skipped)", path=where) from None  # fmt: skip


def stored_cursor_positions(poller: Poller, can: Capabilities, cursor: Any) -> dict[str, int]:
    """The positions of a cursor read from the cursor store, or ValueError saying what is wrong with it.

    A hand-edited ``cursors.json`` can hold anything; each poll checks its cursor here (the poller's own
    ``validate_cursor``, then computable, whole, not negative positions) before the poller reads it.
    """
    problem = can.validate_cursor(cursor) if can.validate_cursor is not None else None
    if problem:
        raise ValueError(problem)
    try:
        positions = poller.positions(cursor)
    except Exception as exc:
        raise ValueError(f"not a cursor of this source ({exc.__class__.__name__})") from None
    if not isinstance(positions, dict):
        raise ValueError("not a cursor of this source (its positions are not a map)")
    bad = [str(k) for k, v in positions.items() if type(v) is not int or v < 0]
    if bad:
        raise ValueError(f"position {', '.join(bad)} must be a whole number, not negative")
    return positions
