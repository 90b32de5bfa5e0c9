"""A hostile mail never reaches a real terminal raw (issue 32 §2): every command under a pty, and the convention itself.

The commands run in a pseudo-terminal (``pty.openpty``, TERM=xterm-256color, a set window size), so they take
their terminal paths (rich's colours, the poll's human line, the search's highlighting). Their output may hold
memex's own colour codes, never a sequence from the mail: not CSI 2J, OSC 0, OSC 52, BEL, the 8-bit CSI, a NUL or
U+202E; each shows the visible form instead. Off a terminal: ``tests/core/test_bad_inputs_terminal.py``.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from memex.safe_text import inert_json, json_text, visible
from tests.core import hostile as h
from tests.core.terminal import run_pty


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hostile world (tests/core/hostile.py), plus an empty store object whose name carries an OSC 0."""
    tmp = tmp_path_factory.mktemp("hostile")
    config = h.hostile_world(tmp)
    (tmp / "state" / "store" / "messages" / "mail" / f"evil{h.TITLE}.json").write_bytes(b"")
    return config


ON_A_TERMINAL = [
    (("show", h.MESSAGE_ID), 0, (h.SHOWN_SUBJECT, h.SHOWN_SENDER, h.SHOWN_BODY, h.SHOWN_FILENAME)),
    (("show", "--json", h.MESSAGE_ID), 0, ("due\\u202efdp.exe", "\\u001b]52;c;")),
    (("search", "invoice"), 0, (h.SHOWN_SENDER, h.SHOWN_BODY)),
    (("search", "--json", "invoice"), 0, ("Mallory \\u202eevil\\u0000",)),
    (("status",), 0, (h.SHOWN_PATH,)),
    (("status", "--json"), 0, ("gone\\u001b]0;pwned\\u0007\\u202edir",)),
    (("tail",), 0, (h.SHOWN_PATH,)),
    (("tail", "--json"), 0, ("gone\\u001b]0;pwned\\u0007\\u202edir",)),
    (("dashboard", "--once"), 0, (h.SHOWN_PATH,)),
    (("cursor", "show"), 0, ("1.hostile\\u001b]0;pwned\\u0007",)),
    (("index", "status"), 0, ("mail",)),
    (("verify",), 1, ("messages/mail/evil\\x1b]0;pwned\\x07.json",)),
    (("poll", "bad"), 1, ("bad: poll error: ", h.SHOWN_PATH)),
    (("show", f"nope{h.CLEAR}"), 2, ("memex: error: no stored message", "nope\\\\x1b[2J")),
]


IDS = ["show", "show-json", "search", "search-json", "status", "status-json", "tail", "tail-json", "dashboard", "cursor-show",
       "index-status", "verify", "poll", "show-unknown-ref"]  # fmt: skip


@pytest.mark.parametrize(("args", "code", "shown"), ON_A_TERMINAL, ids=IDS)
def test_on_a_terminal_hostile_text_is_shown_never_acted_on(world: Path, args: tuple[str, ...], code: int, shown: tuple[str, ...]) -> None:
    """Under a pty: the exit code, no raw hostile sequence, and each field's visible form in the output."""
    got, text = run_pty(*args, config=world)
    assert got == code, text
    h.no_raw(text)
    assert "internal error" not in text and "Traceback" not in text, text
    for form in shown:
        assert form in text, f"{form!r} not in:\n{text}"


def test_status_fits_80_columns_on_a_terminal(world: Path) -> None:
    """At 80 columns ``memex status`` is one line per source, none longer than 80, the long error cut with an ellipsis."""
    code, text = run_pty("status", config=world, cols=80)
    assert code == 0, text
    lines = [li for li in text.split("\n") if li.strip()]
    assert len(lines) == 3 and all(len(li) <= 80 for li in lines), text
    assert lines[0].startswith("SOURCE") and "STATE" in lines[0] and lines[0].rstrip().endswith("RESULT"), text
    assert lines[1].startswith("bad") and "FAILING" in lines[1] and lines[1].endswith("…"), text
    h.no_raw(text)


def unescape(shown: str) -> str:
    """Read text printed by :func:`visible` back (the decoder the convention promises is unambiguous)."""

    def one(m: re.Match[str]) -> str:
        run, code = m.group(1), m.group(2)
        if len(run) % 2:
            return "\\" * (len(run) // 2) + chr(int(code[1:], 16))
        return "\\" * (len(run) // 2) + code

    return re.sub(r"(\\+)(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})", one, shown)


def test_the_visible_form_reads_back_one_way_only() -> None:
    """Random text of controls, backslashes, look-alike escapes, bidi and letters: no control left, read back exactly."""
    rng = random.Random(32)
    alphabet = ["\\", "x", "u", "1", "b", "2", "0", "e", "a", " ", "\x1b", "\x00", "\x07", "\x9b", "\x7f", "\u202e", "\u2066",
                "\r", "\t", "\n", "é", "\u200f", "\udc80"]  # fmt: skip
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        line = visible(text)
        assert not re.search("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]", line), (text, line)
        assert unescape(line) == text, (text, line)
        body = visible(text, multiline=True)
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]", body), (text, body)
        assert unescape(body) == text.replace("\r\n", "\n"), (text, body)


def test_ordinary_text_prints_unchanged() -> None:
    """Paths, right-to-left names with their marks, accents and emoji print as they are: only controls are touched."""
    for text in ("C:\\Users\\anna\\x.txt", "\\\\server\\share", "שלום\u200f עולם", "Café 🙂", "a\\b"):
        assert visible(text) == text
    assert visible("one\ttwo\nthree", multiline=True) == "one\ttwo\nthree"
    assert visible("one\ttwo\nthree") == "one\\x09two\\x0athree"


def test_json_output_is_exact_and_inert() -> None:
    """``json_text`` loads back to exactly the same data and holds no raw C1, DEL, bidi control or surrogate."""
    data = {"subject": h.SUBJECT, "sender": h.SENDER, "text": h.BODY, "odd": "\x7f\udc80\u2066", "plain": "Café 🙂"}
    for text in (json_text(data), json_text(data, indent=2, sort_keys=True), inert_json(json.dumps(data, ensure_ascii=False))):
        assert json.loads(text) == data
        h.no_raw(text)
        assert not re.search("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]", text.replace("\n", ""))
        assert "Café 🙂" in text  # readable UTF-8 stays
