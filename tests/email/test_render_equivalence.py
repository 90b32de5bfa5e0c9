"""Rendering stays byte-identical: every case of ``render_cases`` gives the record, earlier fingerprint, failure and
refingerprint that the renderer before the one-pass parser gave (main at 1fe3679, pinned in ``render_expected.json``).

A change that means to change records regenerates the file (``render_cases.py --write``) and says so in its commit.
"""

from __future__ import annotations

import json

from tests.email.render_cases import EXPECTED, cases, digest


def test_every_case_renders_as_the_renderer_before() -> None:
    """The same digest for every case, and every pinned case still made (a lost case would shrink the check)."""
    expected: dict[str, str] = json.loads(EXPECTED.read_text())["records"]
    made = cases()
    assert sorted(made) == sorted(expected)
    changed = [name for name, raw in sorted(made.items()) if digest(raw) != expected[name]]
    assert changed == []
