"""Third-party libraries' log records (boto3, urllib3, msal, watchdog) in memex's one voice.

memex logs through :mod:`memex.observe.logs`; the libraries it uses log through the standard ``logging`` module,
which, unconfigured, prints a warning as a bare text line on stderr (its "last resort" handler): a line cron would
mail in a form nothing else has. :func:`route_library_logs` gives the root logger one handler instead: warnings
and errors as one JSON line each off a terminal (``event: "library.log"``, the logger's name, the level and the
message with its arguments shown safely: numbers as they are, an exception by its type and system message
(:func:`memex.errors.describe_exc`), a URL's path without its query, any other text as ``...`` (a host, a key, a
header), anything else by its type, and never a template with its ``%r`` unfilled), a short line on a terminal,
and nothing below warning. Installed where such a library is first imported and by every click command; never
by an idle poll (``logging`` imports ``traceback``, which a cron poll with nothing new does without).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

_installed = False
_PLAIN = re.compile(r"/[\w.:/@%-]{0,160}")  # a URL's path: no host, no query, nothing with spaces, quotes or controls


class _Shown(str):
    """An argument's safe text, the same under ``%s`` and ``%r``."""

    def __repr__(self) -> str:
        return str(self)


def _safe(arg: Any) -> Any:
    """What a library record's argument may show (see the module's docstring)."""
    from memex.errors import describe_exc

    if isinstance(arg, bool | int | float):
        return arg
    if isinstance(arg, BaseException):
        return _Shown(describe_exc(arg))
    if isinstance(arg, str):
        text = arg.split("?", 1)[0].split("#", 1)[0]
        return _Shown(text if text.startswith("/") and _PLAIN.fullmatch(text) else "...")
    return _Shown(type(arg).__name__)


def shown(record: Any) -> str:
    """A ``logging`` record's message with its arguments shown safely; the template alone if they do not fit it."""
    template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
    args = record.args
    if not args:
        return str(template)
    try:
        if isinstance(args, dict):
            return str(template % {k: _safe(v) for k, v in args.items()})
        return str(template % tuple(_safe(a) for a in args))
    except (TypeError, ValueError, KeyError):
        return str(template)


def route_library_logs() -> None:
    """Send the standard ``logging`` records of warning and above to stderr in memex's form (once per process)."""
    global _installed
    if _installed:
        return
    import logging

    class Handler(logging.Handler):
        """One record as memex writes an event: JSON off a terminal, a short line on one."""

        def emit(self, record: logging.LogRecord) -> None:
            try:
                stream = sys.stderr
                message = shown(record)
                level = record.levelname.lower()
                if stream.isatty():
                    from memex.safe_text import visible

                    stream.write(f"memex: {visible(record.name)}: {level}: {visible(message)}\n")
                else:
                    event: dict[str, Any] = {"event": "library.log", "logger": record.name, "level": level, "message": message,
                                             "ts": datetime.now(UTC).isoformat().replace("+00:00", "Z")}  # fmt: skip
                    stream.write(json.dumps(event, sort_keys=True) + "\n")
                stream.flush()
            except Exception:  # never let a log line break the work
                self.handleError(record)

    handler = Handler(logging.WARNING)
    logging.getLogger().addHandler(handler)
    _installed = True


@contextmanager
def silenced(name: str) -> Iterator[None]:
    """Nothing the library ``name`` logs reaches the user while the block runs (its complaints quote its input:
    vobject's quote a contact card's lines, a photo's base64 one line each): its logger, each of its modules' loggers
    (``vobject.base`` sets a level of its own, so the parent's does not reach it), and what its modules log through
    the root logger (``logging.error(...)`` in ``vobject.icalendar``)."""
    import logging

    prefix = name + "."
    quiet = [logging.getLogger(n) for n in (name, *(k for k in list(logging.root.manager.loggerDict) if k.startswith(prefix)))]
    saved = [q.disabled for q in quiet]
    folder = f"{os.sep}{name}{os.sep}"

    def outside(record: logging.LogRecord) -> bool:
        return folder not in record.pathname

    for q in quiet:
        q.disabled = True
    logging.root.addFilter(outside)
    try:
        yield
    finally:
        logging.root.removeFilter(outside)
        for q, was in zip(quiet, saved, strict=True):
            q.disabled = was
