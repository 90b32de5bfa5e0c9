"""``memex search``, ``memex show`` and ``memex index status`` without click: what both ways in run.

A search from a shell or a script is mostly Python starting and importing, so these commands, like cron's poll, are
run straight from :mod:`memex.cli.entry` when their command line is plain (:func:`find_args`), and by the click
commands in :mod:`memex.cli.search` otherwise; both call the ``run_*`` functions here, so the output and the errors
are the same either way. This module imports neither click nor anything a search does not need.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from memex.config import Config

SNIPPET_CHARS = 120
PLAIN_WIDTH = 24  # conversation and sender are cut to this many characters in a result line
SEARCH_OPTIONS = ("-n", "--limit", "--json", "--rank", "-h", "--help", "--count", "--output", "--group-by")
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")  # what click.echo strips off a terminal (click's own pattern)

# Where a command renders and what answers it, when a server renders it for a client (:func:`rendering`): stdout,
# stderr and the read model's answer to (op, args). None: sys.stdout, sys.stderr, :func:`served`'s socket.
_RENDER: ContextVar[tuple[TextIO, TextIO, Callable[[str, dict[str, Any]], Any]] | None] = ContextVar("render", default=None)


def stdout() -> TextIO:
    """Where this command's output goes: sys.stdout, or the buffer of a request a server renders."""
    render = _RENDER.get()
    return sys.stdout if render is None else render[0]


def stderr() -> TextIO:
    """Where this command's notes go: sys.stderr, or the buffer of a request a server renders."""
    render = _RENDER.get()
    return sys.stderr if render is None else render[1]


def rendering(out: TextIO, err: TextIO, answer: Callable[[str, dict[str, Any]], Any], args: FindArgs, cfg: Config) -> None:
    """Run the plain command line ``args`` on ``cfg`` as :func:`run` does, its output written to ``out`` and ``err``
    and its data from ``answer`` (a server answering a thin client: :mod:`memex_thin`, :mod:`memex.read.socket`)."""
    token = _RENDER.set((out, err, answer))
    try:
        run(args, lambda _path: cfg)
    finally:
        _RENDER.reset(token)


def render_line(argv: list[str], answer: Callable[[str, dict[str, Any]], Any], cfg: Config) -> tuple[str, str] | None:
    """The text of stdout and stderr of the command line ``argv`` (without the program) run on ``cfg`` with its data
    from ``answer``, or None unless it is a plain search or show (:func:`find_args`): what a server answers a thin
    client (:mod:`memex_thin`; :data:`memex.read.socket.Render`). An error is raised, as in-process."""
    import io

    found = find_args(argv, {})
    if found is None or found.command not in ("search", "show"):
        return None
    out, err = io.StringIO(), io.StringIO()
    rendering(out, err, answer, found, cfg)
    return out.getvalue(), err.getvalue()


def echo(text: str) -> None:
    """Write ``text`` and a newline to stdout as ``click.echo`` does (ANSI styles stripped off a terminal)."""
    out = stdout()
    if not out.isatty():
        text = _ANSI.sub("", text)
    out.write(text + "\n")
    out.flush()


# The fast command lines' options, each named after the click parameter it stands for (memex.cli.search's search and
# show); tests/core/test_entry_options.py walks every click option and fails when one is missing here or differs.
SEARCH_FLAGS = {"--rank": "rank", "--json": "as_json", "--count": "count_only"}
SEARCH_VALUES = {"-n": "limit", "--limit": "limit", "--output": "output", "--group-by": "group_by"}
CHOICES = {"output": ("messages", "threads"), "group_by": ("sender", "conversation", "month")}
SEARCH_DEFAULTS: dict[str, Any] = {"limit": 20, "rank": False, "as_json": False, "count_only": False, "output": "messages",
                                   "group_by": None}  # fmt: skip
SHOW_FLAGS = {"--json": "as_json", "--thread": "whole"}


class FindArgs:
    """A plain ``search``, ``show`` or ``index status`` command line (a plain class: a dataclass costs ~1 ms)."""

    def __init__(self, command: str, config_path: Path | None, words: tuple[str, ...], limit: int, rank: bool, as_json: bool,
                 *, count_only: bool = False, output: str = "messages", group_by: str | None = None, whole: bool = False) -> None:  # fmt: skip
        self.command, self.config_path, self.words = command, config_path, words
        self.limit, self.rank, self.as_json = limit, rank, as_json
        self.count_only, self.output, self.group_by, self.whole = count_only, output, group_by, whole


def find_args(argv: list[str], environ: Any) -> FindArgs | None:
    """``argv`` (without the program) as a plain search, show or index status, or None when click must parse it:
    ``[--config PATH] search [OPTION...] [--] WORD...`` (each of :data:`SEARCH_FLAGS` and :data:`SEARCH_VALUES` at
    most once, ``--name VALUE`` or ``--name=VALUE``, a valid value; without ``--``, no word starting with ``-`` first),
    ``[--config PATH] show [--json] [--thread] REF``, ``[--config PATH] index status [--json]``; no ``--debug``,
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
        return _show_args(cfg_path, rest[1:])
    if rest[0] != "search":
        return None
    opts = _search_options(rest)
    if opts is None:
        return None
    found, j = opts
    words = tuple(rest[j:])
    if not words or (found["count_only"] and found["group_by"]):
        return None  # click says what is missing, or that --count and --group-by go apart
    return FindArgs("search", cfg_path, words, found["limit"], found["rank"], found["as_json"], count_only=found["count_only"],
                    output=found["output"], group_by=found["group_by"])  # fmt: skip


def _search_options(rest: list[str]) -> tuple[dict[str, Any], int] | None:
    """The options of a search line (``rest[0]`` is ``search``) and where its words begin, or None for click."""
    found = dict(SEARCH_DEFAULTS)
    seen: set[str] = set()
    j = 1
    while j < len(rest) and rest[j].startswith("-"):
        arg = rest[j]
        if arg == "--":
            return found, j + 1
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in SEARCH_FLAGS and not eq:
            dest = SEARCH_FLAGS[name]
            found[dest] = True
        elif name in SEARCH_VALUES:
            dest = SEARCH_VALUES[name]
            if not eq:
                if j + 1 >= len(rest):
                    return None
                j += 1
                value = rest[j]
            if dest == "limit":
                if not value.isdigit() or value.startswith("0") or len(value) > 9:
                    return None
                found[dest] = int(value)
            elif value in CHOICES[dest]:
                found[dest] = value
            else:
                return None
        else:
            return None  # -h, --help, a word starting with -, an option click knows another way: click decides
        if dest in seen:
            return None
        seen.add(dest)
        j += 1
    return found, j


def _show_args(cfg_path: Path | None, rest: list[str]) -> FindArgs | None:
    """``show [--json] [--thread] REF`` in any order, each once, or None for click."""
    refs = [a for a in rest if not a.startswith("-")]
    flags = [a for a in rest if a.startswith("-")]
    if len(refs) != 1 or len(set(flags)) != len(flags) or not set(flags) <= set(SHOW_FLAGS):
        return None
    return FindArgs("show", cfg_path, (refs[0],), 0, False, "--json" in flags, whole="--thread" in flags)


def run(args: FindArgs, load: Callable[[Path | None], Config] | None = None) -> None:
    """Run a plain command line found by :func:`find_args` (errors as one line by the caller's guard); ``load`` reads
    the config (:func:`memex.config.load` unless given)."""
    if load is None:
        from memex.config import load as load_config

        load = load_config

    if args.command == "search":
        check_query(args.words)  # before the config, as the click command does
        cfg = load(args.config_path)
        if args.count_only or args.group_by or args.output == "threads":
            run_summaries(cfg, " ".join(args.words), args.limit, output=args.output, count_only=args.count_only,
                          group_by=args.group_by, as_json=args.as_json)  # fmt: skip
        else:
            run_search(cfg, args.words, args.limit, args.rank, args.as_json)
    elif args.command == "show":
        (run_thread if args.whole else run_show)(load(args.config_path), args.words[0], args.as_json)
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
    text = " ".join(words)
    answer = served(cfg, "search", query=text, limit=limit, rank=rank)
    notes: list[str] = []
    if answer is None:
        from memex.read.archive import Archive

        rows = Archive(cfg, follow_people=True).search_rows(text, limit, rank=rank, notes=notes)
    else:
        rows, notes = answer["rows"], answer["notes"]
    from memex.observe.safe_text import json_text, visible

    for note in notes:  # with:VALUE naming nobody: matched as words, and said so
        stderr().write(visible(note) + "\n")
    results = [_result(row) for row in rows]
    if as_json:
        for r in results:
            r["snippet"] = r.pop("_plain")
        echo(json_text(results, indent=2))
        return
    if stdout().isatty():
        _rich(results)
        if not results:
            stderr().write("no messages match\n")
        return
    for r in results:
        echo("  ".join(visible(x) for x in (_when(r["sent_at"]), r["source"], _cut(_conversation(r), PLAIN_WIDTH),
                                            _cut(_sender(r), PLAIN_WIDTH), r["_plain"])))  # fmt: skip


def run_show(cfg: Config, ref: str, as_json: bool) -> None:
    """``memex show``: one message with its revisions and attachment list, read from the store."""
    from memex.cli.show import human

    found = served(cfg, "show", ref=ref)
    if found is not None:
        key, record, revs = found["key"], found["record"], [(k, d) for k, d in found["revisions"]]
    else:
        from memex.cli.show import find, revisions
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


def served(cfg: Config, op: str, **args: Any) -> Any:
    """What a running ``memex watch`` or ``memex serve`` answers to ``op`` over the read socket, or None: then the
    command answers in-process (:mod:`memex.read.client`; the same output either way). ``MEMEX_NO_SERVER`` set: None."""
    import os

    render = _RENDER.get()
    if render is not None:
        return render[2](op, args)
    if os.environ.get("MEMEX_NO_SERVER"):
        return None
    from memex.read.client import ask

    return ask(cfg.state_dir, cfg.path, op, **args)


def run_summaries(cfg: Config, text: str, limit: int, *, output: str, count_only: bool, group_by: str | None, as_json: bool) -> None:
    """``memex search`` with ``--count``, ``--group-by`` or ``--output=threads`` (:mod:`memex.read.conversations`)."""
    import json

    from memex.observe.safe_text import json_text, visible
    from memex.read.archive import Archive

    if count_only and group_by:
        from memex.errors import ConfigError

        raise ConfigError("--count and --group-by: give one of them (--group-by prints a count per group)")
    archive = Archive(cfg)
    if count_only:
        n = served(cfg, "count", query=text, conversations=output == "threads")
        if n is None:
            n = archive.count(text, conversations=output == "threads", people=False)
        echo(json.dumps({"count": n}) if as_json else str(n))
        return
    if group_by:
        groups = served(cfg, "group_counts", query=text, by=group_by, limit=limit)
        if groups is None:
            groups = archive.group_counts(text, group_by, limit)
        if as_json:
            echo(json_text(groups, indent=2))
            return
        for g in groups:
            label = g["group"] or "(none)"
            shown = f"{g['name']} <{label}>" if group_by == "sender" and g["name"] else (g["name"] or label)
            echo(f"{g['count']:>8}  {visible(_cut(shown, 80))}")
        return
    found = served(cfg, "threads", query=text, limit=limit)
    if found is None:
        found = archive.threads(text, limit)
    if as_json:
        echo(json_text(found, indent=2))
        return
    for t in found:
        span = _when(t["first"]) if t["first"] == t["last"] else f"{_when(t['first'])} .. {_when(t['last'])}"
        people = _cut(", ".join(t["participants"]) or "?", 40)
        title = _cut(t["subject"] or t["conversation"] or "-", 60)
        echo(f"{span}  [{t['matched']}/{t['total']}]  {visible(t['source'])}  {visible(people)}; {visible(title)}")


def run_thread(cfg: Config, ref: str, as_json: bool) -> None:
    """``memex show --thread``: every message of the conversation ``ref`` is in, oldest first."""
    from memex.cli.show import human
    from memex.observe.safe_text import json_text

    found = served(cfg, "thread", ref=ref)
    if found is not None:
        messages = [(k, d, [(rk, rd) for rk, rd in r]) for k, d, r in found]
    else:
        from memex.cli.show import conversation, find
        from memex.store import open_store

        store = open_store(cfg.store)
        key, record = find(cfg, store, ref)
        messages = conversation(cfg, store, key, record)
    if as_json:
        echo(json_text({"thread": [{"key": k, "record": d, "revisions": [{"key": rk, "record": rd} for rk, rd in r]}
                                         for k, d, r in messages]}, indent=2, sort_keys=True))  # fmt: skip
        return
    rule = "\n\n" + "=" * 72 + "\n"
    echo(f"{len(messages)} message{'' if len(messages) == 1 else 's'}" + rule + rule.join(human(k, d, r) for k, d, r in messages))


def run_index_status(cfg: Config, as_json: bool) -> None:
    """``memex index status``: per source, indexed, in the store, behind, pending."""
    import json

    from memex.cli.show import status_rows, status_table
    from memex.store import open_store

    rows = status_rows(cfg, open_store(cfg.store))
    echo(json.dumps(rows, indent=2, sort_keys=True) if as_json else status_table(rows))


def _when(sent_at: str | None) -> str:
    return (sent_at or "")[:16].replace("T", " ") or "?"


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _result(row: Any) -> dict[str, Any]:
    from memex.search.parse import HIGHLIGHT

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
    from memex.search.parse import HIGHLIGHT

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
