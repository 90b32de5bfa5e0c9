"""The conformance kit: the checks every source passes, for a plug-in author to run against their own poller.

memex's guarantees (nothing lost, nothing twice, whatever the crash, signal or time limit) are the runner's, but
they rest on what a poller promises: batches in cursor order, a cursor after every item that resumes right after
it, records that do not depend on when or from which copy they were read, a cursor that never moves back unless a
reset is declared. :func:`check_poller` checks those promises on a real source; :func:`check_poll` runs memex's own
poll over it twice. Each raises :class:`Nonconforming` naming the check and what it saw (never message text).

Used by memex's tests for every built-in source and for the example plug-in (``examples/memex-jsonl``); a plug-in's
own test suite calls it the same way (docs/plugins.md, "The conformance kit")::

    from memex.conformance import check_poll, check_poller, sample_config

    def test_my_source_conforms(tmp_path):
        folder = write_sample(tmp_path / "data", 10)                  # your own: a real source holding 10 messages
        cfg = sample_config(tmp_path, "mytype", path=str(folder))     # state and a file store under tmp_path
        check_poller(lambda: make(cfg.source("sample")), expected=10, add=lambda n: append_sample(folder, n))
        check_poll(cfg, "sample", expected=10)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memex.capabilities import Capabilities, capabilities, misspelt
from memex.config import Config
from memex.live_cursor import check_cursor
from memex.source import Batch, Cursor, Poller, moved_backward

MAX_STOPS = 6  # resume points tried (each re-reads the rest of the source)


class Nonconforming(AssertionError):
    """A poller broke a promise of the plug-in contract; the message names the check (``[drain] ...``)."""


@dataclass
class Drained:
    """What one read of a source from a cursor to its end gave: each record's key and bytes, and every cursor."""

    keys: list[str] = field(default_factory=list)  # in the order read (messages, revisions and failures alike)
    records: dict[str, bytes] = field(default_factory=dict)  # key -> canonical JSON (failures: b"")
    stops: list[tuple[int, Cursor]] = field(default_factory=list)  # (keys read so far, the cursor right after them)
    cursor: Cursor = None  # where the source stood at the end


def _fail(check: str, what: str) -> Nonconforming:
    return Nonconforming(f"[{check}] {what}")


def _json_round_trip(check: str, cursor: Cursor) -> None:
    """A cursor is saved as JSON: it must come back equal."""
    try:
        back = json.loads(json.dumps(cursor))
    except (TypeError, ValueError) as exc:
        raise _fail(check, f"cursor is not JSON-serialisable ({exc.__class__.__name__})") from None
    if back != cursor:
        raise _fail(check, "cursor does not survive a JSON round trip (tuples, non-string keys?)")


def _check_item_cursor(check: str, poller: Poller, can: Capabilities, cursor: Cursor, before: dict[str, int]) -> dict[str, int]:
    _json_round_trip(check, cursor)
    try:
        positions = check_cursor(poller, can, cursor)
    except ValueError as exc:
        raise _fail(check, f"a cursor it made is refused by its own checks: {exc}") from None
    back = moved_backward(before, positions)
    if back:
        raise _fail(check, f"positions {', '.join(back)} moved backward without a declared reset")
    return positions


def _key(item: Any, source: str, check: str) -> tuple[str, bytes]:
    """The store key an item goes to and its record bytes; checks the item's shape and the record's schema."""
    from memex.schema import problem

    if (item.message is None) == (item.failure is None):
        raise _fail(check, "an item must carry exactly one of message or failure")
    if item.failure is not None:
        if not item.failure.native_id or not isinstance(item.failure.reason, str):
            raise _fail(check, "a failure needs a native_id and a one-line reason")
        return f"quarantine:{item.failure.native_id}", b""
    message = item.message
    if message.source != source:
        raise _fail(check, f"record's source is {message.source!r}, not the poller's name {source!r}")
    if not isinstance(message.native_id, str) or not message.native_id:
        raise _fail(check, "a record needs a non-empty string native_id")
    why = problem(message.to_dict())
    if why is not None:
        raise _fail(check, f"record {message.native_id!r} does not follow the schema: {why}")
    return message.key(), message.to_json()


def drain(
    poller: Poller, cursor: Cursor = None, *, limit: int = 3, check: str = "drain", most: int = 100_000, release: bool = False
) -> Drained:
    """Read from ``cursor`` to the end in batches of ``limit``, checking every batch, item and cursor on the way.

    ``release``: at the end, tell a spooling poller that everything read is durable (``stored``), as the runner does
    after saving the cursor, so what backs it may be deleted.
    """
    out = Drained(cursor=cursor)
    can = capabilities(poller)
    positions = poller.positions(cursor) if cursor is not None else {}
    for _ in range(most):
        batch: Batch = poller.fetch(out.cursor, limit)
        if len(batch.items) > limit:
            raise _fail(check, f"a batch of {len(batch.items)} items for a limit of {limit}")
        if batch.reset:
            raise _fail(check, f"a reset was declared on an unchanged source ({batch.reset})")
        before = positions
        for n, item in enumerate(batch.items, 1):
            key, body = _key(item, poller.name, check)
            if key in out.records and not item.expected_dup:
                raise _fail(check, f"{key} came twice in one read of the source (not marked expected_dup)")
            out.keys.append(key)
            out.records[key] = body
            positions = _check_item_cursor(check, poller, can, batch.after(n, out.cursor), positions)
            out.stops.append((len(out.keys), batch.after(n, out.cursor)))
        if batch.cursor is not None:
            positions = _check_item_cursor(check, poller, can, batch.cursor, before if not batch.items else positions)
        moved = batch.cursor != out.cursor
        out.cursor = batch.cursor
        if not batch.items and not moved:
            if release and can.stored is not None and out.cursor is not None:  # memex.capabilities.Spooling
                can.stored(out.cursor)
            return out
    raise _fail(check, f"still not caught up after {most} batches (does fetch ever return an empty batch?)")


def check_poller(
    make: Callable[[], Poller],
    *,
    expected: int,
    add: Callable[[int], None] | None = None,
    copy: Callable[[], Poller] | None = None,
    limit: int = 3,
) -> list[str]:
    """Run every check of the plug-in contract on a source holding ``expected`` records; return the checks run.

    First of all, the poller's attributes: a name that looks like a misspelt capability (``validate_cursr``), or half
    a capability's Protocol (``inventory`` without ``reread``), is a ``[capabilities]`` failure
    (:func:`memex.capabilities.misspelt`): memex would silently treat the poller as one without it.

    A spooling poller (one with ``stored``: its source hands each message over once, as signal-cli does) is held to
    what its spool promises instead of exact resumes: resuming from a cursor may read an earlier record of the same
    spool entry again (a counted duplicate), never lose one; the kit calls ``stored`` as the runner would.

    ``make`` builds a fresh poller over the source (called several times; each is closed after use). ``add(n)``,
    if given, adds ``n`` new messages to the source (for the caught-up, new-message and ``head`` checks). ``copy``,
    if given, builds a poller over a copy of the source at another path: its records must be the same bytes.
    """
    ran: list[str] = []

    def fresh_drain(cursor: Cursor = None, check: str = "drain", factory: Callable[[], Poller] = make, release: bool = False) -> Drained:
        poller = factory()
        try:
            return drain(poller, cursor, limit=limit, check=check, release=release)
        finally:
            poller.close()

    probe = make()
    try:
        problems = misspelt(probe)
        if problems:
            raise _fail("capabilities", "; ".join(problems))
        can = capabilities(probe)
        spooled = can.stored is not None  # a source read once (a queue): what backs it goes when stored
        moves_when_idle = can.moves_when_idle  # memex.capabilities.MovesWhenIdle
    finally:
        probe.close()
    first = fresh_drain()
    distinct = set(first.keys)
    if len(distinct) != expected:
        raise _fail("drain", f"read {len(distinct)} distinct records, expected {expected}")
    ran.append("drain")

    spread = sorted({i * len(first.stops) // MAX_STOPS for i in range(MAX_STOPS)}) if first.stops else []
    for done, cursor in (first.stops[i] for i in spread):
        rest = fresh_drain(cursor, check="resume")
        if not spooled and set(first.keys[:done]) & (set(rest.keys) - _dups(first)):  # a spool re-reads its entry
            raise _fail("resume", f"resuming after item {done} read an earlier record again")
        if set(first.keys[:done]) | set(rest.keys) != distinct:
            raise _fail("resume", f"resuming after item {done} lost {len(distinct - set(first.keys[:done]) - set(rest.keys))} records")
    ran.append("resume")

    again = fresh_drain(check="deterministic")
    changed = [k for k in distinct if again.records.get(k) != first.records[k]]
    if changed:
        raise _fail("deterministic", f"{len(changed)} records differ between two reads of the same source (e.g. {changed[0]})")
    ran.append("deterministic")
    if copy is not None:
        other = fresh_drain(check="copy", factory=copy)
        changed = [k for k in distinct if other.records.get(k) != first.records[k]]
        if changed or set(other.keys) != distinct:
            raise _fail("copy", f"a copy of the source gives other records or keys ({len(changed)} differ)")
        ran.append("copy")

    if spooled:  # what was read is now stored: the spool lets go of it, as after a poll
        first.cursor = fresh_drain(check="release", release=True).cursor
    tail = fresh_drain(first.cursor, check="caught-up")
    if tail.keys:
        raise _fail("caught-up", f"{len(tail.keys)} records read again after the end")
    ran.append("caught-up")
    still = fresh_drain(tail.cursor, check="still")  # a poll of the unchanged source, one more time
    probe = make()
    try:
        was, now = probe.positions(tail.cursor), probe.positions(still.cursor)
    finally:
        probe.close()
    if not moves_when_idle and (still.keys or now != was):
        raise _fail("still", f"the cursor moved ({was} -> {now}) on an unchanged source with {len(still.keys)} records read: each "
                    "poll would pass something without storing it (memex status shows it STUCK), or declare moves_when_idle")  # fmt: skip
    ran.append("still")
    if add is None:
        return ran
    add(2)  # each later read is a fresh poller, as each poll is
    new = fresh_drain(first.cursor, check="new")
    if len(set(new.keys)) != 2 or set(new.keys) & distinct:
        raise _fail("new", f"after 2 messages were added, read {len(set(new.keys) - distinct)} new records")
    ran.append("new")
    poller = make()
    try:
        can = capabilities(poller)
        head = can.head  # memex.capabilities.Headed
        start = head() if head is not None else None
        if start is not None:
            _check_item_cursor("head", poller, can, start, {})
    finally:
        poller.close()
    if head is not None:
        add(1)
        after_head = fresh_drain(start, check="head")
        if len(set(after_head.keys)) != 1:
            raise _fail("head", f"from head(), 1 message added, {len(set(after_head.keys))} records read")
        ran.append("head")
    return ran


def _dups(drained: Drained) -> set[str]:
    """Keys a read met more than once (allowed where the poller marked them expected_dup)."""
    seen: set[str] = set()
    twice: set[str] = set()
    for key in drained.keys:
        (twice if key in seen else seen).add(key)
    return twice


def sample_config(folder: Path, source_type: str, name: str = "sample", **keys: Any) -> Config:
    """A config with one source ``[sources.NAME]`` of ``source_type`` and ``keys``, its state and a file store inside
    ``folder`` (written to ``folder/config.toml``): what :func:`check_poll` and a plug-in's own tests poll into."""
    import json as _json

    from memex.config import load

    def value(v: Any) -> str:
        return "true" if v is True else "false" if v is False else _json.dumps(str(v) if isinstance(v, Path) else v)

    lines = [f"state_dir = {value(folder / 'state')}", "[store]", f"url = {value((folder / 'store').absolute().as_uri())}",
             f"[sources.{name}]", f"type = {value(source_type)}", *(f"{k} = {value(v)}" for k, v in keys.items())]  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return load(path)


def check_poll(cfg: Config, name: str, *, expected: int) -> None:
    """memex's own poll over the source, twice: the first stores ``expected`` records, the second none (exit 0 both)."""
    from memex.runner import poll

    first = poll(cfg, name)
    if first.exit_code != 0 or first.new + first.quarantined != expected:
        raise _fail(
            "poll", f"first poll: {first.status}, {first.new} new, {first.quarantined} quarantined, expected {expected} ({first.error})"
        )
    second = poll(cfg, name)
    if second.exit_code != 0 or second.new or second.dup:
        raise _fail("poll", f"second poll: {second.status}, {second.new} new, {second.dup} duplicates (expected idle)")
