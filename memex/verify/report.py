"""What ``memex verify`` found and did: counts per source and kind of damage, a few examples each, as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memex.verify.checks import DAMAGE, DESCRIBE

EXAMPLES = 20  # keys kept per source and kind (the counts are complete; a disaster does not fill memory or the screen)
ATTACHMENTS = "(attachments)"  # the pseudo-source content-addressed attachments are reported under (they are shared)


@dataclass
class SourceReport:
    """One source's part of the store (or the shared attachments)."""

    name: str
    objects: int = 0
    records: int = 0
    revisions: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    quarantined: int = 0
    quarantine_examples: list[dict[str, str]] = field(default_factory=list)
    inventory: str = "index-only"  # what the source comparison did: "checked", "index-only", or why it was skipped
    listed: int = 0  # messages the source has up to its cursor (when checked)
    before: dict[str, int] | None = None  # with --repair: what the first pass found (``counts`` is then what is left)
    repaired: dict[str, int] = field(default_factory=dict)  # "restored" (was missing), "replaced" (was damaged), "originals from revisions"
    not_repaired: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # parts of the source up to the cursor it could not list, and why
    deleted_unseen: int = 0  # tombstones of messages deleted before a poll saw them: no original, and none to expect

    def add(self, kind: str, example: dict[str, str]) -> None:
        """Count one damaged object (or missing message) and keep it as an example if there is room."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        shown = self.examples.setdefault(kind, [])
        if len(shown) < EXAMPLES:
            shown.append(example)

    def quarantine(self, example: dict[str, str]) -> None:
        """Count one quarantined record (kept raw because it could not be rendered)."""
        self.quarantined += 1
        if len(self.quarantine_examples) < EXAMPLES:
            self.quarantine_examples.append(example)

    @property
    def damaged(self) -> int:
        """Objects damaged plus messages missing, before any repair."""
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``--json``)."""
        return {
            "objects": self.objects,
            "records": self.records,
            "revisions": self.revisions,
            "damage": {k: self.counts.get(k, 0) for k in DAMAGE},
            "examples": self.examples,
            "quarantined": self.quarantined,
            "quarantine_examples": self.quarantine_examples,
            "inventory": self.inventory,
            "listed": self.listed,
            "found_before_repair": None if self.before is None else {k: self.before.get(k, 0) for k in DAMAGE},
            "repaired": self.repaired,
            "not_repaired": self.not_repaired,
            "unchecked": self.unchecked,
            "deleted_before_seen": self.deleted_unseen,
            "whole": self.damaged == 0,
        }


@dataclass
class Report:
    """The whole run."""

    store: str
    sources: dict[str, SourceReport] = field(default_factory=dict)
    other: int = 0  # objects outside the layout (left alone)
    seconds: float = 0.0
    repair: bool = False
    temp: dict[str, int] | None = None  # a local store's .memex-tmp: temp files, stale ones, removed (memex.store.files.TempFiles)

    def source(self, name: str) -> SourceReport:
        """The report of ``name``, created on first use."""
        found = self.sources.get(name)
        if found is None:
            found = self.sources[name] = SourceReport(name)
        return found

    @property
    def objects(self) -> int:
        """Every object read."""
        return self.other + sum(s.objects for s in self.sources.values())

    @property
    def whole(self) -> bool:
        """Nothing damaged or missing is left (quarantined records are accounted for, not damage)."""
        return all(s.damaged == 0 for s in self.sources.values())

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``--json``): stable keys for scripts."""
        return {
            "store": self.store,
            "whole": self.whole,
            "objects": self.objects,
            "other_objects": self.other,
            "seconds": round(self.seconds, 3),
            "repair": self.repair,
            "sources": {n: s.to_json() for n, s in sorted(self.sources.items())},
            "temp_files": self.temp,
        }

    def human(self) -> str:
        """The summary: one line per source, then the examples of what is wrong and what to do (fits a screen)."""
        rate = self.objects / self.seconds if self.seconds > 0 else 0.0
        verdict = "whole" if self.whole else "NOT whole"
        lines = [f"memex verify: {self.store}: {verdict}; {self.objects} objects read in {self.seconds:.1f}s ({rate:.0f}/s)"]
        width = max((len(n) for n in self.sources), default=8)
        for name, s in sorted(self.sources.items()):
            parts = [f"{s.objects} objects"]
            if s.inventory == "checked":
                parts.append(f"{s.listed} in the source up to the cursor")
                if s.unchecked:
                    parts.append(f"{len(s.unchecked)} part(s) of the source not checked")
            elif s.inventory != "index-only":
                parts.append(f"source not compared: {s.inventory}")
            parts += [f"{n} {DESCRIBE[k]}" for k in DAMAGE if (n := s.counts.get(k, 0))]
            if s.quarantined:
                parts.append(f"{s.quarantined} quarantined")
            if s.deleted_unseen:
                parts.append(f"{s.deleted_unseen} deleted before memex saw them")
            if s.repaired:
                parts.append("repaired: " + ", ".join(f"{n} {k}" for k, n in sorted(s.repaired.items())))
            if s.before:
                parts.append("found before repair: " + ", ".join(f"{n} {DESCRIBE[k]}" for k, n in s.before.items() if n))
            status = "ok" if s.damaged == 0 else "DAMAGED"
            lines.append(f"  {name:<{width}}  {status:<7}  " + "; ".join(parts))
        shown = 0
        for name, s in sorted(self.sources.items()):
            for kind in DAMAGE:
                for ex in s.examples.get(kind, [])[:3]:
                    if shown < 12:
                        where = ex.get("key") or f"{ex.get('native_id')} (at {ex.get('ref')})"
                        if ex.get("revision"):
                            where += f", its revision {ex['revision']}"
                        lines.append(f"  {name}: {DESCRIBE[kind]}: {where}" + (f": {ex['reason']}" if ex.get("reason") else ""))
                    shown += 1
            for reason in s.not_repaired[:3]:
                lines.append(f"  {name}: not repaired: {reason}")
            for why in s.unchecked[:3]:
                lines.append(f"  {name}: not checked: {why}")
            if len(s.unchecked) > 3:
                lines.append(f"  {name}: not checked: ... and {len(s.unchecked) - 3} more (memex verify --json lists them all)")
        if shown > 12:
            lines.append(f"  ... and {shown - 12} more (memex verify --json lists up to {EXAMPLES} per kind)")
        if self.temp and self.temp["files"]:
            lines.append("  " + temp_line(self.temp))
        if not self.whole and not self.repair:
            lines.append("  run `memex verify --repair` to re-read what the sources still have (it never deletes anything)")
        return "\n".join(lines)


def temp_line(temp: dict[str, int]) -> str:
    """What ``.memex-tmp`` holds, in words: temp files of writers that were killed (removed by --repair or the next
    poll that stores) and those of writers still at work (left alone)."""
    mib = 1 << 20
    parts = []
    if temp["removed"]:
        parts.append(f"{temp['removed']} left by a stopped writer ({temp['removed_bytes'] / mib:.1f} MiB) removed")
    elif temp["stale"]:
        parts.append(f"{temp['stale']} left by a stopped writer (killed?; {temp['stale_bytes'] / mib:.1f} MiB): the next poll that "
                     "stores, or memex verify --repair, removes them")  # fmt: skip
    live = temp["files"] - temp["stale"]
    if live:
        parts.append(f"{live} of a writer at work ({(temp['bytes'] - temp['stale_bytes']) / mib:.1f} MiB), left alone")
    return ".memex-tmp: " + "; ".join(parts)
