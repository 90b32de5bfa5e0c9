"""Third-party libraries' log records (boto3, urllib3, msal, watchdog) in memex's one voice.

memex logs through :mod:`memex.observe.logs`; the libraries it uses log through the standard ``logging`` module,
which, unconfigured, prints a warning as a bare text line on stderr (its "last resort" handler): a line cron would
mail in a form nothing else has. :func:`route_library_logs` gives the root logger one handler instead: warnings
and errors as one JSON line each off a terminal (``event: "library.log"``, the logger's name, the level and the
message *template*, never its arguments: they could quote a host, a key or a header), a short line on a terminal,
and nothing below warning. Installed where such a library is first imported and by every click command; never
by an idle poll (``logging`` imports ``traceback``, which a cron poll with nothing new does without).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

_installed = False


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
                message = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
                level = record.levelname.lower()
                if stream.isatty():
                    from memex.observe.safe_text import visible

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
