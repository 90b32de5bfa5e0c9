"""Run one memex command of a source tree with each stage of a poll timed: CPU seconds by stage, written as JSON.

Run (in the tree): ``python /path/to/bench/stage_timer.py OUT.json TREE -- [memex arguments]``. The tree's packages
come first on ``sys.path``, so the memex of any checkout (a previous release) is timed the same way. Each stage is a
few functions, wrapped where they are defined and wherever a module imported them by name; a wrapper adds the CPU
time of its thread (``time.thread_time``) spent inside it, less what a nested wrapped function spent (counted to that
one's stage). Threads count too (the IMAP fetch-ahead reader, the index's background update). What no stage claims
is ``other`` (start-up, the runner's loop, logging, the cursor). A stage's functions that a tree lacks are skipped.

The stages (:data:`STAGES`): ``fetch`` (IMAP's commands and their answers parsed, a Maildir file read), ``render``
(a mail parsed and rendered: record fields, text, attachments, search text), ``records`` (the schema check, the
record as JSON), ``store`` (the store's writes and their commit), ``index`` (the index's journal and its update).
"""

from __future__ import annotations

import cProfile
import functools
import importlib
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGES: dict[str, tuple[str, ...]] = {
    "fetch": ("imaplib:IMAP4.uid", "imaplib:IMAP4.select", "pollers.email.session:ImapSession._parse",
              "pollers.email.maildir:MaildirPoller._read", "pollers.email.maildir:MaildirPoller._list",
              # the same functions after pollers/email's sub-packages (a tree has one set or the other)
              "pollers.email.imap.session:ImapSession._parse", "pollers.email.maildir.poller:MaildirPoller._read",
              "pollers.email.maildir.poller:MaildirPoller._list"),
    "render": ("pollers.email.render:to_item", "pollers.email.mail.render:to_item"),
    "records": ("memex.uploader:conforms", "memex.records:canonical_json", "memex.records:Message.to_json"),
    "store": ("memex.uploader:Uploader.put", "memex.uploader:Uploader.sync"),
    "index": ("memex.search.build:Follower.before_commit", "memex.search.build:Follower._update_index",
              "memex.search.build:Follower.catch_up"),
}  # fmt: skip

spent: dict[str, float] = dict.fromkeys(STAGES, 0.0)
_stack = threading.local()


def timed(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` adding its thread's CPU time to ``stage``, less what wrapped functions inside it spent."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        frames = getattr(_stack, "frames", None)
        if frames is None:
            frames = _stack.frames = []
        frames.append(0.0)  # CPU time of wrapped calls inside this one
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.thread_time() - start
            inner = frames.pop()
            spent[stage] += took - inner
            if frames:
                frames[-1] += took

    return wrapper


def install() -> list[str]:
    """Wrap every stage's functions, in their module and wherever a loaded module holds them by name; the stages none
    of whose functions the tree has (a module moved: name its new place in :data:`STAGES`)."""
    for module in ("memex.cli.poll", "memex.runner", "memex.uploader", "memex.search.build", "pollers.email.imap",
                   "pollers.email.maildir", "pollers.email.render", "pollers.email.imap.poller", "pollers.email.maildir.poller",
                   "pollers.email.mail.render", "memex.advance"):  # fmt: skip
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    found: set[str] = set()
    for stage, names in STAGES.items():
        for name in names:
            module_name, _, path = name.partition(":")
            owner: Any = sys.modules.get(module_name)
            *outer, attr = path.split(".")
            for part in outer:
                owner = getattr(owner, part, None)
            original = getattr(owner, attr, None) if owner is not None else None
            if original is None:
                continue
            wrapped = timed(stage, original)
            found.add(stage)
            setattr(owner, attr, wrapped)
            if not outer:  # a module function: also where it was imported by name
                for mod in list(sys.modules.values()):
                    if getattr(mod, attr, None) is original:
                        setattr(mod, attr, wrapped)
    return [stage for stage in STAGES if stage not in found]


def main() -> None:
    """Time the memex command line after ``--``; write the stages' CPU seconds and the process's to OUT."""
    out, tree = Path(sys.argv[1]), Path(sys.argv[2])
    args = sys.argv[sys.argv.index("--") + 1 :]
    sys.path.insert(0, str(tree))
    missing = install()
    from memex.cli.entry import main as memex_main

    sys.argv = ["memex", *args]
    code: object = 0
    profile = os.environ.get("STAGE_PROFILE")  # a cProfile of the main thread, written there (pstats)
    profiler = cProfile.Profile() if profile else None
    try:
        if profiler is not None:
            profiler.enable()
        memex_main()
    except SystemExit as exc:
        code = exc.code
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(f"{profile}.{os.getpid()}")
        usage = resource.getrusage(resource.RUSAGE_SELF)
        out.write_text(json.dumps({"stages": spent, "cpu": usage.ru_utime + usage.ru_stime, "code": code, "missing": missing}))
    sys.exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    main()
