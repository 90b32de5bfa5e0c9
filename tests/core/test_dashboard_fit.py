"""The dashboard fits the terminal: at 80x24 every source's name and state word show in full, nothing wraps or overflows."""

from __future__ import annotations

import shutil
from pathlib import Path

from memex import config as config_mod
from memex.observe.dashboard import render_text
from pollers.imessage import samples as imessage_samples
from tests.conftest import run_cli, write_config

NAMES = ("phone-imessage-main", "laptop-imessage-old", "tablet-imessage", "broken-imessage-db")


def four_sources(tmp_path: Path) -> Path:
    """Four iMessage sources: two OK, one that failed and then recovered, one FAILING (db gone); returns the config path."""
    sources = {}
    for i, name in enumerate(NAMES):
        db = tmp_path / f"{name}.db"
        imessage_samples.build(db, 10 + i, seed=i)
        sources[name] = {"type": "imessage", "db": str(db)}
    cfg = write_config(tmp_path, sources)
    assert run_cli("poll", "--all", config=cfg).returncode == 0
    kept = tmp_path / "tablet.bak"
    shutil.move(tmp_path / "tablet-imessage.db", kept)
    (tmp_path / "broken-imessage-db.db").unlink()
    for _ in range(3):
        assert run_cli("poll", "--all", config=cfg).returncode == 1
    shutil.move(kept, tmp_path / "tablet-imessage.db")
    assert run_cli("poll", "tablet-imessage", config=cfg).returncode == 0  # recovered
    return cfg


def rows(text: str) -> dict[str, list[str]]:
    """The table's rows by source name: the cells, stripped."""
    return {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")}


def header(text: str) -> list[str]:
    """The table's column headings."""
    line = next(li for li in text.splitlines() if "SOURCE" in li)
    return [c.strip() for c in line.replace("┃", "│").split("│")[1:-1]]


def test_fits_80x24_with_names_states_ages_and_the_last_error(tmp_path: Path) -> None:
    """At 80x24: no line longer than 80, at most 24 lines, full names and state words, last poll age, and the error with its time."""
    cfg = config_mod.load(four_sources(tmp_path))
    text = render_text(cfg, width=80, height=24)
    lines = text.splitlines()
    assert len(lines) <= 24 and all(len(li) <= 80 for li in lines), text
    cols = header(text)
    assert cols[:2] == ["SOURCE", "STATE"] and "LAST POLL" in cols and "LAST ERROR" in cols, cols
    table = rows(text)
    assert set(table) == set(NAMES)
    states = {name: cells[1] for name, cells in table.items()}
    assert states == {
        "phone-imessage-main": "IDLE",
        "laptop-imessage-old": "IDLE",
        "tablet-imessage": "IDLE",
        "broken-imessage-db": "FAILING",
    }
    error = table["broken-imessage-db"][cols.index("LAST ERROR")]
    assert error[2] == ":" and error[5:7] == "Z:", error  # HH:MMZ: then the error
    assert table["tablet-imessage"][cols.index("LAST ERROR")] == ""  # cleared once the source recovered
    assert all(table[n][cols.index("LAST POLL")].endswith("ago") for n in NAMES)
    assert "latest polls" in text  # the poll lines fill what is left


def test_wide_terminal_shows_every_column_and_more_poll_lines(tmp_path: Path) -> None:
    """At 160x45 every column is shown, lines stay within 160, and the screen holds more poll lines than at 80x24."""
    cfg = config_mod.load(four_sources(tmp_path))
    wide = render_text(cfg, width=160, height=45)
    lines = wide.splitlines()
    assert len(lines) <= 45 and all(len(li) <= 160 for li in lines), wide
    assert header(wide) == ["SOURCE", "STATE", "CURSOR", "LAST POLL", "LAST OK", "NEW/DUP", "1H", "24H", "PER HOUR (24H)", "LAST ERROR"]
    narrow = render_text(cfg, width=80, height=24)
    assert len(wide.split("latest polls")[1].splitlines()) > len(narrow.split("latest polls")[1].splitlines())


def test_once_has_no_quit_hint(tmp_path: Path) -> None:
    """memex dashboard --once prints a screen to read, not one to quit: no "q or Ctrl-C quits" line."""
    cfg = four_sources(tmp_path)
    out = run_cli("dashboard", "--once", "--width", "80", "--height", "24", config=cfg)
    assert out.returncode == 0, out.stderr
    assert "broken-imessage-db" in out.stdout and "quits" not in out.stdout
