"""Text from a message or a source made safe to print: every control visible, nothing a terminal would act on.

A mail can carry ``ESC [ 2 J`` (clear the screen), ``ESC ] 0 ; ... BEL`` (set the window title),
``ESC ] 52 ; c ; ... BEL`` (write the clipboard), a NUL, or a right-to-left override (U+202E) that makes
``exe.txt`` read as ``txt.exe``. Every field that comes from a message or a source (text, subject, names,
conversation, file names, server text or a path quoted in an error) goes through :func:`visible` before it is
printed for a person; ``--json`` output goes through :func:`json_text` (or :func:`inert_json`), which stays exact.

The convention (also in docs/searching.md, "Hostile text"):

* Shown as ``\\xHH``: the C0 controls (U+0000 to U+001F, so ESC is ``\\x1b`` and NUL ``\\x00``), DEL (U+007F) and
  the C1 controls (U+0080 to U+009F, the 8-bit CSI U+009B among them). In a multi-line body, newline and tab stay as
  they are and CR LF is shown as a newline; a lone CR (which would let a line overwrite itself) is ``\\x0d``.
* Shown as ``\\uHHHH``: the bidirectional embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069),
  which reorder the text around them, and lone surrogates (an undecodable byte kept by Python). The direction
  *marks* U+200E, U+200F and U+061C stay: they are ordinary in right-to-left writing and reorder nothing but
  the neutral characters beside them.
* A backslash stays one backslash, except right before something that would read as an escape (a shown control,
  or ``x`` and two hex digits, or ``u`` and four): then every backslash of that run is doubled. So ``C:\\Users``
  and ``\\\\server\\share`` print unchanged, and any shown text reads back one way only: a run of backslashes
  before ``xHH``/``uHHHH`` is an escape when it is odd, a literal text when even (halved either way).

It imports only :mod:`re` and :mod:`json`, both on cron's poll path already: the poll prints its lines through it.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Shown escaped in single-line fields: every C0 control, DEL, C1, the bidi embeddings/overrides/isolates, surrogates.
_UNSAFE = "\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
# In a multi-line body: the same but newline and tab.
_UNSAFE_BODY = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_LOOKS_ESCAPED = "x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}"


def _pattern(unsafe: str) -> re.Pattern[str]:
    return re.compile(rf"(\\+)(?=[{unsafe}]|{_LOOKS_ESCAPED})|[{unsafe}]")


_LINE = _pattern(_UNSAFE)
_BODY = _pattern(_UNSAFE_BODY)
# Raw characters ``json.dumps(..., ensure_ascii=False)`` leaves in its output that a terminal acts on or that
# reorder text: DEL, C1, bidi controls, lone surrogates (it escapes C0 itself). They occur only inside strings.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _shown(match: re.Match[str]) -> str:
    run = match.group(1)
    if run:
        return run * 2
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: object, *, multiline: bool = False) -> str:
    """``text`` (any value: ``str()`` of it) with every control character shown as an escape (see the module docstring).

    ``multiline``: a body printed over several lines, whose newlines and tabs stay (CR LF as a newline); otherwise
    (a table cell, a header, a name, an error line) newline and tab are shown escaped too, so a field stays on its line.
    """
    value = text if isinstance(text, str) else str(text)
    if multiline:
        return _BODY.sub(_shown, value.replace("\r\n", "\n"))
    return _LINE.sub(_shown, value)


def inert_json(serialized: str) -> str:
    """JSON text with the raw DEL, C1, bidi and surrogate characters written as ``\\uHHHH``: the same data, inert.

    ``json.dumps`` escapes C0 controls always, but with ``ensure_ascii=False`` leaves those raw; written as
    ``\\uHHHH`` inside their string they load back to exactly the same characters.
    """
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", serialized)


def json_text(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **kwargs)`` made inert (:func:`inert_json`): readable UTF-8, exact data."""
    return inert_json(json.dumps(value, ensure_ascii=False, **kwargs))
