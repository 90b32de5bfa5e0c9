"""People: the handles of one person across every source, from the user's cards, their own decisions and what the
messages themselves say.

Built afresh whenever it is asked for (it is small: one entry per handle, not per message), in this order:

1. **Your decisions** (``people.toml`` beside the config, written by ``memex people merge/split/name`` or by hand):
   ``[person.ID]`` with ``name``, ``handles`` (hers whatever a card says) and ``not`` (never hers). A handle you
   give two people is a conflict, given to neither.
2. **Cards** (vCard files, the Mac's address book): every handle on a card is one person. Two cards that share a
   handle are one person when they carry the same name (one contact exported twice); with different names the
   shared handle is a **conflict**, reported by ``memex people conflicts`` and given to neither, never merged. A
   card sharing a handle with one of your people joins that person.
3. **Me**: every handle a source marked as the user's own (``is_me``) belongs to the person ``me``.
4. **What the messages say**: every other handle seen is a person of its own, named by the display name most often
   seen with it; a name-only handle (Messenger) joins the one person of that name, if there is exactly one.

Person IDs are yours in ``people.toml``, else made of the name (``anna-berg``, ``anna-berg-2``): decisions name
handles, never made-up IDs, so a rebuild of the index keeps every merge and split.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memex.people.cards import Card
from memex.people.handles import Rules, normalize, shown

ME = "me"
DEFAULT_RULES = Rules()


@dataclass
class Person:
    """One person: an ID to refer to them by, a name, every handle that is theirs, and where each came from."""

    id: str
    name: str | None
    handles: set[str] = field(default_factory=set)
    origins: list[str] = field(default_factory=list)  # "people.toml", "card John_Doe.vcf#1", "messages"


@dataclass(frozen=True)
class Conflict:
    """A handle two people claim: given to neither until you decide (``memex people merge`` or ``people.toml``)."""

    handle: str
    claimants: tuple[str, ...]  # who claims it, as a person reads it ("Anna Berg (card contacts.vcf#3)")


@dataclass(frozen=True)
class Decision:
    """One ``[person.ID]`` table of people.toml, its handles as written."""

    id: str
    name: str | None
    handles: tuple[str, ...]
    never: tuple[str, ...]


@dataclass(frozen=True)
class Seen:
    """A handle as the messages show it: how often, under which display names, and whether it is the user's."""

    handle: str
    count: int
    names: Mapping[str, int]
    is_me: bool = False


@dataclass
class Book:
    """Everyone: people by ID, the owner of each handle, and the conflicts."""

    people: dict[str, Person] = field(default_factory=dict)
    owner: dict[str, str] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)

    def find(self, ref: str, rules: Rules) -> list[Person]:
        """The people ``ref`` names: an ID, a name (case and spaces ignored), or one of their handles."""
        if ref in self.people:
            return [self.people[ref]]
        folded = fold(ref)
        named = [p for p in self.people.values() if p.name and fold(p.name) == folded]
        if named:
            return named
        handle = normalize(ref, rules)
        if handle is not None and handle in self.owner:
            return [self.people[self.owner[handle]]]
        words = name_words(ref)
        return [p for p in self.people.values() if words and words_in(words, p.name)]


def fold(name: str | None) -> str | None:
    """A name as names are compared: case-folded, its spaces collapsed (None for no name)."""
    return " ".join(name.casefold().split()) if name else None


def name_words(ref: str) -> frozenset[str]:
    """The words of a reference to a person by parts of their name."""
    return _words(ref)


def words_in(words: frozenset[str], name: str | None) -> bool:
    """Whether every word of ``words`` begins a word of ``name`` ("John Richter" or "Anna B" names John Richter)."""
    have = _words(name)
    return all(any(n.startswith(w) for n in have) for w in words)


def build(decisions: Iterable[Decision], cards: Iterable[Card], seen: Iterable[Seen], rules: Rules) -> Book:
    """Everyone, from your decisions, the cards and the handles seen in messages (the module's docstring says how)."""
    book = Book()
    taken: dict[str, str] = {}  # handle -> person id (only undisputed ones)
    disputed: dict[str, list[str]] = {}
    never: dict[str, set[str]] = {}
    mine = list(decisions)
    for d in sorted(mine, key=lambda d: d.id):
        person = book.people[d.id] = Person(d.id, d.name, origins=["people.toml"])
        never[d.id] = {h for h in (normalize(x, rules) for x in d.never) if h}
        for handle in filter(None, (normalize(x, rules) for x in d.handles)):
            if handle in taken and taken[handle] != d.id:
                disputed.setdefault(handle, [_label(book.people[taken[handle]], "people.toml")]).append(_label(person, "people.toml"))
            else:
                taken[handle] = d.id
    for handle in disputed:
        del taken[handle]

    for group in _card_groups(list(cards), rules, book, taken):
        handles, names, origins = group
        owners = {taken[h] for h in handles if h in taken}
        target = min(owners) if owners else None
        if target is None:
            name = Counter(names).most_common(1)[0][0] if names else None
            target = _new_id(book, name or shown(sorted(handles)[0]))
            book.people[target] = Person(target, name)
        person = book.people[target]
        person.origins.extend(f"card {o}" for o in origins)
        if person.name is None and names:
            person.name = Counter(names).most_common(1)[0][0]
        for handle in handles:
            if handle not in taken and handle not in disputed and handle not in never.get(target, set()):
                taken[handle] = target

    contested = set(disputed) | {c.handle for c in book.conflicts}  # given to nobody until you decide
    seen_list = sorted(seen, key=lambda s: s.handle)
    for s in seen_list:
        if s.is_me and s.handle not in taken and s.handle not in contested and s.handle not in never.get(ME, set()):
            if ME not in book.people:
                book.people[ME] = Person(ME, "me", origins=["messages"])
            taken[s.handle] = ME
    by_name: dict[str, list[str]] = {}
    for person in book.people.values():
        if person.name:
            by_name.setdefault(" ".join(person.name.casefold().split()), []).append(person.id)
    for s in seen_list:
        if s.handle in taken or s.handle in contested:
            continue
        if s.handle.startswith("name:"):
            same = by_name.get(s.handle[5:], [])
            if len(same) == 1 and s.handle not in never.get(same[0], set()):
                taken[s.handle] = same[0]
                continue
        name = max(s.names.items(), key=lambda kv: (kv[1], kv[0]))[0] if s.names else None
        pid = _new_id(book, name or shown(s.handle))
        book.people[pid] = Person(pid, name or shown(s.handle), origins=["messages"])
        taken[s.handle] = pid

    for handle, pid in taken.items():
        book.people[pid].handles.add(handle)
    book.owner = taken
    book.conflicts = sorted([*book.conflicts, *(Conflict(h, tuple(c)) for h, c in disputed.items())], key=lambda c: c.handle)
    return book


def _card_groups(cards: list[Card], rules: Rules, book: Book, taken: dict[str, str]) -> list[tuple[set[str], list[str], list[str]]]:
    """Cards joined into people: (handles, names, origins) each; a handle shared by differently named cards is
    recorded as a conflict in ``book`` and left out of both."""
    handles = [set(c.keys) if c.keys is not None else {h for h in (normalize(x, rules) for x in c.handles) if h} for c in cards]
    parent = list(range(len(cards)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    claim: dict[str, list[int]] = {}
    for i, hs in enumerate(handles):
        for h in hs:
            claim.setdefault(h, []).append(i)
    disputed: set[str] = set()
    for h, who in claim.items():
        if h in taken:
            continue  # your decision settles it
        if not _same_name([cards[i].name for i in who]):
            disputed.add(h)
            book.conflicts.append(Conflict(h, tuple(f"{cards[i].name or shown(h)} (card {cards[i].origin})" for i in who)))
        else:
            for i in who[1:]:
                parent[root(i)] = root(who[0])
    groups: dict[int, tuple[set[str], list[str], list[str]]] = {}
    for i, card in enumerate(cards):
        hs, names, origins = groups.setdefault(root(i), (set(), [], []))
        hs.update(h for h in handles[i] if h not in disputed)
        if card.name:
            names.append(card.name)
        origins.append(card.origin)
    return [g for g in groups.values() if g[0]]


def _words(name: str | None) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", (name or "").casefold()))


def _same_name(names: list[str | None]) -> bool:
    """Whether cards sharing a handle name one person: their names' words (case and punctuation aside) are the same,
    or one's are all in another's (``Mr. John Richter`` and ``Mr. John Richter, James Doe Sr.``, as two exports write
    one contact). A card without a name agrees with any."""
    words = sorted((w for w in (_words(n) for n in names) if w), key=len)
    return all(small <= words[-1] for small in words)


def _label(person: Person, origin: str) -> str:
    return f"{person.name or person.id} ({origin})"


def slug(text: str) -> str:
    """An ID made of a name: ``Anna Berg`` -> ``anna-berg`` (accents dropped; ``person`` when nothing is left)."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", plain).strip("-")[:40] or "person"


def _new_id(book: Book, name: str) -> str:
    base = slug(name)
    pid, n = base, 1
    while pid in book.people or pid == ME:
        n += 1
        pid = f"{base}-{n}"
    return pid


def valid_id(pid: str) -> bool:
    """Whether ``pid`` is a person ID as people.toml takes it: lower-case letters, digits and ``-``, as :func:`slug` makes."""
    return bool(pid) and slug(pid) == pid


def decisions_from(doc: Mapping[str, Any], where: str, rules: Rules = DEFAULT_RULES) -> list[Decision]:
    """The ``[person.ID]`` tables of a parsed people.toml; ValueError naming the key for anything else.

    The rule every value of the file is held to, read or written: an ID as :func:`valid_id` takes it, a name that is
    not empty, and handles that are handles (:func:`memex.people.handles.normalize` gives one)."""
    out: list[Decision] = []
    unknown = set(doc) - {"person"}
    if unknown:
        raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}; people.toml holds [person.ID] tables only")
    people = doc.get("person", {})
    if not isinstance(people, dict):
        raise ValueError(f"{where}: 'person' must be tables [person.ID]")
    for pid, table in people.items():
        if not isinstance(table, dict) or not valid_id(pid):
            raise ValueError(f"{where}: [person.{pid}] must be a table whose ID is lower-case letters, digits and '-' (at most 40)")
        extra = set(table) - {"name", "handles", "not"}
        if extra:
            raise ValueError(f"{where}: key person.{pid}.{sorted(extra)[0]} is unknown (known: name, handles, not)")
        name = table.get("name")
        lists = {k: table.get(k, []) for k in ("handles", "not")}
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"{where}: key person.{pid}.name must be a name (a string that is not empty)")
        for key, value in lists.items():
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}: key person.{pid}.{key} must be a list of strings")
            for v in value:
                if normalize(v, rules) is None:
                    raise ValueError(
                        f"{where}: key person.{pid}.{key}: {v!r} is not a handle (a phone number, an address, an ID or a name)"
                    )
        out.append(Decision(pid, name, tuple(lists["handles"]), tuple(lists["not"])))
    return out


HEADER = (
    "# memex people: your decisions about who is who (memex people merge, split and name write here; edit freely).\n"
    "# [person.ID]: name, handles (theirs whatever a card says), not (never theirs). docs/people.md\n\n"
)


def render_decisions(decisions: Iterable[Decision], rules: Rules = DEFAULT_RULES) -> str:
    """people.toml's text for ``decisions``, written by a TOML writer (``tomli_w``), never by formatting strings.

    Every value is first held to the rule the file is read with (:func:`decisions_from`), and the text is read back
    and compared: a value memex could not read again is a ValueError naming it, and nothing is written."""
    import tomllib

    import tomli_w

    ordered = sorted(decisions, key=lambda d: d.id)
    tables: dict[str, dict[str, Any]] = {}
    for d in ordered:
        table: dict[str, Any] = {} if d.name is None else {"name": d.name}
        table["handles"] = list(d.handles)
        if d.never:
            table["not"] = list(d.never)
        tables[d.id] = table
    doc = {"person": tables}
    decisions_from(doc, "people.toml", rules)  # the reading rule, before a byte is made
    text = HEADER + tomli_w.dumps(doc)
    if decisions_from(tomllib.loads(text), "people.toml", rules) != [Decision(d.id, d.name, d.handles, d.never) for d in ordered]:
        raise ValueError("people.toml: the text written would not read back as the decisions made; nothing was written")
    return text
