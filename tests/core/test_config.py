"""Configuration: the documented shape works, and every mistake is one line naming the file and key (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memex import config
from memex.errors import ConfigError
from pollers.imessage import samples as imessage_samples
from tests.conftest import read_log, run_cli, write_config


def test_issue_example_shape_parses(tmp_path: Path) -> None:
    """The documented TOML shape loads: state_dir, a file store URL, a source named by its section."""
    path = tmp_path / "c.toml"
    path.write_text(
        'state_dir = "/var/lib/memex"\n[store]\nurl = "file:///var/lib/memex/store"\n'
        '[sources.imessage]\ntype = "imessage"\ndb = "~/Library/Messages/chat.db"\n'
    )
    cfg = config.load(path)
    assert cfg.state_dir == Path("/var/lib/memex")
    assert cfg.store.url == "file:///var/lib/memex/store"
    assert cfg.sources["imessage"].type == "imessage"
    assert cfg.sources["imessage"].options == {"db": "~/Library/Messages/chat.db"}


def test_defaults_embed_a_file_store_under_state_dir(tmp_path: Path) -> None:
    """With no [store], objects go to <state_dir>/store; relative paths are taken from the config's folder."""
    path = tmp_path / "c.toml"
    path.write_text('state_dir = "st"\n')
    cfg = config.load(path)
    assert cfg.state_dir == tmp_path / "st"
    assert cfg.store.url == (tmp_path / "st" / "store").as_uri()


def test_lookup_order_env_then_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--config wins, then $MEMEX_CONFIG, then $XDG_CONFIG_HOME/memex/config.toml."""
    monkeypatch.delenv("MEMEX_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config.find_config(None) == tmp_path / "xdg" / "memex" / "config.toml"
    monkeypatch.setenv("MEMEX_CONFIG", str(tmp_path / "env.toml"))
    assert config.find_config(None) == tmp_path / "env.toml"
    assert config.find_config(str(tmp_path / "explicit.toml")) == tmp_path / "explicit.toml"


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("state_dir = 3\n", "state_dir", "must be a string"),
        ("stat_dir = 'x'\n", "stat_dir", "unknown key"),
        ("[store]\nurl = 'ftp://x'\n", "store.url", "unsupported store URL"),
        ("[store]\nurl = 's3://'\n", "store.url", "must be s3://bucket/prefix"),
        ("[sources.a]\ndb = 'x'\n", "sources.a.type", "required key is missing"),
        ("[sources.a]\ntype = 'imessage'\nstart = 'yesterday'\n", "sources.a.start", 'must be "beginning" or "now"'),
        ("[sources.a]\ntype = 'imessage'\ninterval = 0\n", "sources.a.interval", "at least 1"),
        ("[sources.'a/b']\ntype = 'imessage'\n", "sources.a/b", "source names may hold only"),
    ],
)
def test_bad_config_is_one_line_naming_file_and_key(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    """Each mistake raises ConfigError (exit 2) whose one-line message names the file and the dotted key."""
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        cfg = config.load(path)
        for source in cfg.sources.values():  # a broken source section loads, and stops only that source
            source.check()
    message = str(info.value)
    assert str(path) in message and repr(key) in message and fragment in message
    assert "\n" not in message
    assert info.value.exit_code == 2


def test_cli_config_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    """Through the CLI: invalid TOML, a missing file, an unknown type or key each give exit 2 and one stderr line, no traceback."""
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("state_dir = [\n")
    cases = [
        (bad_toml, "invalid TOML"),
        (tmp_path / "missing.toml", "no config file"),
    ]
    unknown_type = write_config(tmp_path / "t", {"a": {"type": "carrier-pigeon"}}) if (tmp_path / "t").mkdir() is None else None
    assert unknown_type is not None
    cases.append((unknown_type, "unknown source type 'carrier-pigeon'"))
    typo = write_config(tmp_path / "k", {"a": {"type": "imessage", "dbb": "x"}}) if (tmp_path / "k").mkdir() is None else None
    assert typo is not None
    cases.append((typo, "'sources.a.dbb': unknown key"))
    for path, fragment in cases:
        out = run_cli("poll", "a", config=path)
        assert out.returncode == 2, (path, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0] and str(path) in lines[0], out.stderr
        assert "Traceback" not in out.stderr


def test_unknown_source_name_is_a_usage_error(tmp_path: Path) -> None:
    """Polling a source that is not configured names the configured ones and exits 2."""
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")}})
    out = run_cli("poll", "imessag", config=cfg)
    assert out.returncode == 2
    assert "no source named 'imessag' (configured: imessage)" in out.stderr


def test_two_sources_of_one_type_are_independent(tmp_path: Path) -> None:
    """Two iMessage sources under different names keep separate cursors, logs and key prefixes."""
    imessage_samples.build(tmp_path / "a.db", 30, seed=1)
    imessage_samples.build(tmp_path / "b.db", 20, seed=2)
    cfg = write_config(tmp_path, {"mac": {"type": "imessage", "db": "a.db"}, "old-mac": {"type": "imessage", "db": "b.db"}})
    out = run_cli("poll", "--all", config=cfg)
    assert out.returncode == 0, out.stderr
    state = tmp_path / "state"
    assert read_log(state, "mac")[-1]["new"] == 30
    assert read_log(state, "old-mac")[-1]["new"] == 20
    assert len(list((state / "store" / "messages" / "mac").iterdir())) == 30
    assert len(list((state / "store" / "messages" / "old-mac").iterdir())) == 20


def test_broken_source_does_not_stop_the_others(tmp_path: Path) -> None:
    """In poll --all, a source with a bad key fails alone (exit 2) while the good one is polled."""
    imessage_samples.build(tmp_path / "a.db", 10, seed=1)
    cfg = write_config(tmp_path, {"good": {"type": "imessage", "db": "a.db"}, "bad": {"type": "imessage", "dbx": "a.db"}})
    out = run_cli("poll", "--all", config=cfg)
    assert out.returncode == 2
    assert "sources.bad.dbx" in out.stderr
    assert read_log(tmp_path / "state", "good")[-1]["new"] == 10
