"""``memex search``, ``memex show`` and ``memex index status`` without click: what both ways in run.

A search from a shell or a script is mostly Python starting and importing, so these commands, like cron's poll, are
run straight from :mod:`memex.cli.entry` when their command line is plain (:func:`find_args`), and by the click
commands in :mod:`memex.cli.search` otherwise; both call the ``run_*`` functions here, so the output and the errors
are the same either way. This module imports neither click nor anything a search does not need.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memex.config import Config

SNIPPET_CHARS = 120
PLAIN_WIDTH = 24  # conversation and sender are cut to this many characters in a result line
SEARCH_OPTIONS = ("-n", "--limit", "--json", "--rank", "-h", "--help", "--count", "--output", "--group-by")
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")  # what click.echo strips off a terminal (click's own pattern)


def echo(text: str) -> None:
    """Write ``text`` and a newline to stdout as ``click.echo`` does (ANSI styles stripped off a terminal)."""
    out = sys.stdout
    if not out.isatty():
        text = _ANSI.sub("", text)
    out.write(text + "\n")
    out.flush()


class FindArgs:
    """A plain ``search``, ``show`` or ``index status`` command line (a plain class: a dataclass costs ~1 ms)."""

    def __init__(self, command: str, config_path: Path | None, words: tuple[str, ...], limit: int, rank: bool, as_json: bool) -> None:
        self.command, self.config_path, self.words = command, config_path, words
        self.limit, self.rank, self.as_json = limit, rank, as_json


def find_args(argv: list[str], environ: Any) -> FindArgs | None:
    """``argv`` (without the program) as a plain search, show or index status, or None when click must parse it:
    ``[--config PATH] search [-n N | --limit N | --limit=N] [--rank] [--json] WORD...`` (no word starting with ``-``
    first), ``[--config PATH] show [--json] REF``, ``[--config PATH] index status [--json]``; no ``--debug``,
    ``--help``, ``MEMEX_DEBUG``, empty ``MEMEX_CONFIG`` or config path that is a folder."""
    if "MEMEX_DEBUG" in environ or environ.get("MEMEX_CONFIG") == "":
        return None
    config: str | None = None
    i = 0
    if argv[:1] == ["--config"] and len(argv) > 1:
        config, i = argv[1], 2
    elif argv[:1] and argv[0].startswith("--config="):
        config, i = argv[0][len("--config=") :], 1
    for path in (config, None if config is not None else environ.get("MEMEX_CONFIG")):
        if path is not None and (path == "" or Path(path).is_dir()):
            return None  # click's message for a config path that is a folder
    cfg_path = Path(config) if config is not None else None
    rest = argv[i:]
    if not rest:
        return None
    if rest[0] == "index" and rest[1:2] == ["status"] and rest[2:] in ([], ["--json"]):
        return FindArgs("index status", cfg_path, (), 0, False, rest[2:] == ["--json"])
    if rest[0] == "show":
        refs = [a for a in rest[1:] if not a.startswith("-")]
        if len(refs) == 1 and rest[1:] in ([refs[0]], [refs[0], "--json"], ["--json", refs[0]]):
            return FindArgs("show", cfg_path, (refs[0],), 0, False, "--json" in rest)
        return None
    if rest[0] != "search":
        return None
    limit, rank, as_json, seen = 20, False, False, set()
    j = 1
    while j < len(rest) and rest[j].startswith("-"):
        arg = rest[j]
        name = arg.split("=", 1)[0] if arg.startswith("--limit=") else arg
        if name in seen:
            return None
        seen.add(name)
        if arg in ("-n", "--limit") or arg.startswith("--limit="):
            if "=" not in arg and j + 1 >= len(rest):
                return None
            value = rest[j + 1] if "=" not in arg else arg.split("=", 1)[1]
            if "=" not in arg:
                j += 1
            if not value.isdigit() or value.startswith("0") or len(value) > 9:
                return None
            limit = int(value)
        elif arg == "--rank":
            rank = True
        elif arg == "--json":
            as_json = True
        else:
            return None  # --, -h, --help, a word starting with -, an option click knows another way: click decides
        j += 1
    words = tuple(rest[j:])
    if not words:
        return None
    return FindArgs("search", cfg_path, words, limit, rank, as_json)


def run(args: FindArgs) -> None:
    """Run a plain command line found by :func:`find_args` (errors as one line by the caller's guard)."""
    from memex.config import load

    if args.command == "search":
        check_query(args.words)  # before the config, as the click command does
        run_search(load(args.config_path), args.words, args.limit, args.rank, args.as_json)
    elif args.command == "show":
        run_show(load(args.config_path), args.words[0], args.as_json)
    else:
        run_index_status(load(args.config_path), args.as_json)


def late_option(words: tuple[str, ...]) -> str | None:
    """The first option written after the query (options go first), or None."""
    late = [t for t in words if t in SEARCH_OPTIONS or t.startswith(("--limit=", "--output=", "--group-by="))]
    return late[0] if late else None


def _refuse(late: str) -> None:
    from memex.search.parse import QueryError

    raise QueryError(f"{late} after the query: options go first (memex search -n 5 --json WORDS...)")


def check_query(words: tuple[str, ...]) -> None:
    """Refuse a misplaced option or a query that cannot be read (:class:`memex.search.parse.QueryError`), before
    the config or the index is read."""
    from memex.search.parse import tree

    late = late_option(words)
    if late:
        _refuse(late)
    tree(" ".join(words))


def run_search(cfg: Config, words: tuple[str, ...], limit: int, rank: bool, as_json: bool) -> None:
    """``memex search``: the messages ``words`` (a query) finds, newest first or best first, as lines or JSON."""
    from memex.search.index import SearchIndex
    from memex.search.query import parse
    from memex.search.schema import STEM

    text = " ".join(words)
    parse(text)  # a query that cannot be read is refused before the index is opened
    from memex.search import index_path
    from memex.search.persons import Lookup

    with SearchIndex.open(cfg.state_dir, create=False) as index:
        people = Lookup(cfg, index_path(cfg.state_dir))  # opened only by a with:, from: or to: term
        try:
            q = parse(text, stemmed=STEM in index.tables, people=people)
        finally:
            people.close()
        from memex.observe.safe_text import visible

        for note in people.notes:  # with:VALUE naming nobody: matched as words, and said so
            sys.stderr.write(visible(note) + "\n")
        results = [_result(row) for row in q.run(index.select, limit, rank=rank)]
    from memex.observe.safe_text import json_text, visible

    if as_json:
        for r in results:
            r["snippet"] = r.pop("_plain")
        echo(json_text(results, indent=2))
        return
    if sys.stdout.isatty():
        _rich(results)
        if not results:
            sys.stderr.write("no messages match\n")
        return
    for r in results:
        echo("  ".join(visible(x) for x in (_when(r["sent_at"]), r["source"], _cut(_conversation(r), PLAIN_WIDTH),
                                            _cut(_sender(r), PLAIN_WIDTH), r["_plain"])))  # fmt: skip


def run_show(cfg: Config, ref: str, as_json: bool) -> None:
    """``memex show``: one message with its revisions and attachment list, read from the store."""
    from memex.search.show import find, human, revisions
    from memex.store import open_store

    store = open_store(cfg.store)
    key, record = find(cfg, store, ref)
    revs = revisions(store, key)
    if as_json:
        from memex.observe.safe_text import json_text

        echo(json_text({"key": key, "record": record, "revisions": [{"key": k, "record": d} for k, d in revs]},
                       indent=2, sort_keys=True))  # fmt: skip
        return
    echo(human(key, record, revs))


def run_index_status(cfg: Config, as_json: bool) -> None:
    """``memex index status``: per source, indexed, in the store, behind, pending."""
    import json

    from memex.search.show import status_rows, status_table
    from memex.store import open_store

    rows = status_rows(cfg, open_store(cfg.store))
    echo(json.dumps(rows, indent=2, sort_keys=True) if as_json else status_table(rows))


def _when(sent_at: str | None) -> str:
    return (sent_at or "")[:16].replace("T", " ") or "?"


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _result(row: Any) -> dict[str, Any]:
    from memex.search.query import HIGHLIGHT

    snippet = row["snippet"] if row["snippet"] is not None else _cut(row["text"], SNIPPET_CHARS)
    if not snippet and row["subject"]:
        snippet = row["subject"]
    return {
        "key": row["key"], "source": row["source"], "native_id": row["native_id"], "sent_at": row["sent_at"],
        "conversation": {"id": row["conv_id"] or None, "name": row["conv_name"] or None},
        "sender": {"id": row["sender_id"] or None, "name": row["sender_name"] or None, "is_me": bool(row["is_me"])},
        "subject": row["subject"] or None, "attachments": row["n_attachments"], "edited": bool(row["edited"]),
        "deleted": bool(row["deleted"]), "snippet": " ".join(snippet.split()),
        "_plain": " ".join(snippet.replace(HIGHLIGHT[0], "").replace(HIGHLIGHT[1], "").split()),
    }  # fmt: skip


def _conversation(r: dict[str, Any]) -> str:
    return str(r["conversation"]["name"] or r["conversation"]["id"] or "-")


def _sender(r: dict[str, Any]) -> str:
    who = r["sender"]["name"] or r["sender"]["id"]
    if r["sender"]["is_me"]:
        return f"{who} (me)" if who else "me"
    return str(who or "?")


def _rich(results: list[dict[str, Any]]) -> None:
    """Each result as one coloured line: every field shown through :func:`visible`, the matched words in bold."""
    from rich.console import Console
    from rich.text import Text

    from memex.observe.safe_text import visible
    from memex.search.query import HIGHLIGHT

    console = Console(highlight=False)
    for r in results:
        line = Text()
        line.append(visible(_when(r["sent_at"])), style="dim")
        line.append("  ")
        line.append(visible(r["source"]), style="cyan")
        line.append(f"  {visible(_cut(_conversation(r), PLAIN_WIDTH))}  ")
        line.append(visible(_cut(_sender(r), PLAIN_WIDTH)), style="green")
        line.append("  ")
        marked = False
        for piece in r["snippet"].replace(HIGHLIGHT[1], HIGHLIGHT[0]).split(HIGHLIGHT[0]):
            line.append(visible(piece), style="bold yellow" if marked else "")
            marked = not marked
        console.print(line, soft_wrap=True)
