"""The published record schema (``memex.message/1``, JSON Schema Draft 2020-12) and the one check against it.

``message-1.json`` beside this module is the schema every stored record and revision conforms to, whatever its
source; ``memex schema`` prints it. :func:`problem` is the core's only idea of a valid record: the uploader calls
it before anything of a record is stored (one that fails is quarantined, never stored) and ``memex verify`` calls it
on every object it reads.

The validator is ``fastjsonschema``: it compiles the schema once per process into plain Python, about twenty
times cheaper per record than ``jsonschema``'s interpreter (``bench/schema_cost.py``). The schema uses only
keywords whose meaning is the same in Draft 2020-12 and in the drafts fastjsonschema implements (7, 2019-09), and
the tests check it against the 2020-12 meta-schema and against ``jsonschema`` itself. Nothing is imported or
compiled until a record is checked: an idle poll never loads the validator.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCHEMA_FILE = "message-1.json"

_lock = threading.Lock()
_compiled: tuple[Callable[[Any], Any], type[Exception]] | None = None


def schema_text() -> str:
    """The schema file's text, as shipped in the package."""
    return (Path(__file__).parent / SCHEMA_FILE).read_text(encoding="utf-8")


def schema() -> dict[str, Any]:
    """The schema as a JSON object."""
    import json

    doc: dict[str, Any] = json.loads(schema_text())
    return doc


def _validator() -> tuple[Callable[[Any], Any], type[Exception]]:
    """The compiled check and the exception it raises (compiled on first use, once per process)."""
    global _compiled
    if _compiled is None:
        with _lock:  # backfill's upload threads may reach the first record together
            if _compiled is None:
                import fastjsonschema

                # Formats are annotations in 2020-12; the timestamps' shape is the schema's own "pattern".
                _compiled = fastjsonschema.compile(schema(), use_formats=False), fastjsonschema.JsonSchemaValueException
    return _compiled


def problem(doc: Any) -> str | None:
    """Why ``doc`` does not conform to ``memex.message/1`` (the validator's one-line message), or None if it does.

    The message names the field and the rule it breaks (``data.type must be one of [...]``), never the
    field's value, which may be message text (a field the schema lacks is named by its name).
    """
    check, invalid = _validator()
    try:
        check(doc)
    except invalid as exc:
        return " ".join(str(getattr(exc, "message", exc)).split())
    return None
