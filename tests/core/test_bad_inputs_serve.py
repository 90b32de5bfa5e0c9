"""Bad inputs of ``memex serve`` (the server never starts on them), run through the harness in ``tests/core/bad_inputs.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.bad_inputs import Case, run_case


def _missing_config(tmp: Path) -> Path:
    return tmp / "nowhere" / "config.toml"


def _broken_config(tmp: Path) -> Path:
    path = tmp / "config.toml"
    path.write_text('state_dir = "/tmp/x"\n[store\nurl = 1\n')
    return path


CASES = [
    Case("serve-config-missing", ("serve", "--port", "1"), 2, "config.toml", setup=_missing_config, input=""),
    Case("serve-config-broken", ("serve", "--port", "1"), 2, "config.toml", setup=_broken_config, input=""),
    Case("serve-open-address-without-token", ("serve", "--host", "0.0.0.0", "--port", "1"), 2, "--token", setup=_missing_config, input=""),
    # click's usage errors: its usage line, the hint, the error (as every command's)
    Case("serve-port-out-of-range", ("serve", "--port", "70000"), 2, "70000", input="", lines=3),
    Case("serve-extra-argument", ("serve", "now"), 2, "unexpected extra argument", input="", lines=3),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_gets_one_line_and_harms_nothing(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, no traceback, no raw escape, nothing changed outside the configured paths."""
    run_case(case, tmp_path)
