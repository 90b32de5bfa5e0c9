"""Issue 32's config safety: URLs and names checked at load, HOME, the BOM, and one broken section stopping only itself.

The table of bad inputs through the CLI is ``tests/core/test_bad_inputs_config.py``; here are the checks that need more
than one command line (watch, a rebuild's rows, a reset cursor) and the parser's own cases.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from memex import config
from memex.errors import ConfigError
from pollers.imessage import samples as imessage_samples
from tests.conftest import read_log, run_cli, wait_until, write_config
from tests.email.test_maildir import deliver, mail, make_maildir


def parse_store(url: str, **more: str) -> config.Config:
    """A config with only ``[store]`` (``url`` and ``more``), from a file in /etc (so relative paths are not taken from tmp)."""
    return config.parse({"state_dir": "/nonexistent/state", "store": {"url": url, **more}}, Path("/nonexistent/memex/config.toml"))


@pytest.mark.parametrize(
    ("url", "stored"),
    [("file:///srv/memex/store", "file:///srv/memex/store"), ("file://localhost/srv/memex/store", "file:///srv/memex/store"),
     ("FILE:///srv/x", "file:///srv/x"), ("file:///srv/my%20store", "file:///srv/my%20store"),
     ("store", "file:///nonexistent/memex/store"), ("s3://memex-archive/me", "s3://memex-archive/me")],
)  # fmt: skip
def test_a_store_url_memex_can_take_is_kept_as_one_absolute_url(url: str, stored: str) -> None:
    """``file:///abs``, ``file://localhost/abs`` and plain paths become one ``file:///`` URL; a valid S3 URL is kept."""
    assert parse_store(url).store.url == stored


@pytest.mark.parametrize(
    ("url", "says"),
    [("file://~/memex-store", "cannot name a host ('~')"), ("file://relative/store", "cannot name a host ('relative')"),
     ("file:store", "must start with file:///"), ("file:/srv/x", "must start with file:///"),
     ("file://host.example/srv", "cannot name a host"), ("file:///srv/x#frag", "query or fragment"),
     ("s3://Bad_Bucket!!/x", "not a valid S3 bucket name"), ("s3://ab/x", "not a valid S3 bucket name"),
     ("s3://a..b/x", "no '..'"), ("s3://10.0.0.1/x", "not an IP address"), ("s3://xn--bucket/x", "reserves"),
     ("s3:///x", "must be s3://bucket/prefix"), ("ftp://x/y", "unsupported store URL")],
)  # fmt: skip
def test_a_store_url_that_would_write_elsewhere_is_refused_at_load(url: str, says: str) -> None:
    """``file://~/x`` would write to ``/x``, a bad bucket would fail only as a connection: each is exit 2 naming store.url."""
    with pytest.raises(ConfigError) as info:
        parse_store(url)
    assert says in str(info.value) and "key 'store.url'" in str(info.value) and info.value.exit_code == 2


@pytest.mark.parametrize(
    ("endpoint", "ok"),
    [("https://s3.example.com", True), ("http://127.0.0.1:9000", True), ("http://[::1]:9000/base", True),
     ("not a url", False), ("ftp://host", False), ("http://", False), ("http://h:99999", False), ("http://h:port", False),
     ("https://h/x y", False)],
)  # fmt: skip
def test_endpoint_url_is_checked_at_load(endpoint: str, ok: bool) -> None:
    """``endpoint_url`` is an http(s) URL with a host and a numeric port, else exit 2 naming store.endpoint_url."""
    if ok:
        assert parse_store("s3://memex-archive/x", endpoint_url=endpoint).store.endpoint_url == endpoint
        return
    with pytest.raises(ConfigError, match=r"key 'store\.endpoint_url'"):
        parse_store("s3://memex-archive/x", endpoint_url=endpoint)


def test_state_url_bucket_is_checked_like_the_store(tmp_path: Path) -> None:
    """``state_url`` follows the same S3 rules: a bad bucket is refused at load, naming state_url."""
    with pytest.raises(ConfigError, match=r"key 'state_url'.*'Bad_Bucket' is not a valid S3 bucket name"):
        config.parse({"state_dir": str(tmp_path), "state_url": "s3://Bad_Bucket/x"}, tmp_path / "c.toml")
    assert config.parse({"state_dir": str(tmp_path), "state_url": "s3://memex-state/h"}, None).state_url == "s3://memex-state/h"


def test_a_config_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """A UTF-8 BOM (Windows editors write one; TOML forbids it) is skipped, not reported as invalid TOML."""
    path = tmp_path / "c.toml"
    path.write_bytes(b'\xef\xbb\xbfstate_dir = "st"\n[sources.a]\ntype = "imessage"\ndb = "x.db"\n')
    assert config.load(path).sources["a"].type == "imessage"


@pytest.mark.parametrize("home", ["", None], ids=["empty", "unset"])
def test_a_default_path_needs_home_and_an_empty_one_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: str | None) -> None:
    """With HOME empty or unset, the default state folder, config path and ``~`` paths are one line naming HOME, not ``/...``."""
    for name in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "MEMEX_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home)
    how = "empty" if home == "" else "not set"
    with pytest.raises(ConfigError, match=f"HOME is {how}, and the default state folder"):
        config.parse({}, tmp_path / "c.toml")
    with pytest.raises(ConfigError, match=f"HOME is {how}, and the default config file"):
        config.find_config(None)
    with pytest.raises(ConfigError, match=f"key 'state_dir': HOME is {how}"):
        config.parse({"state_dir": "~/memex"}, tmp_path / "c.toml")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert config.parse({}, tmp_path / "c.toml").state_dir == tmp_path / "xdg" / "memex"


def test_a_broken_section_loads_and_stops_only_its_source(tmp_path: Path) -> None:
    """Bad common keys keep the config loadable: that source carries its error (raised when it is used), the rest are whole."""
    doc = {"sources": {"good": {"type": "imessage", "db": "a.db"}, "notype": {"db": "x"}, "late": {"type": "imessage", "start": "yesterday"},
                       "huge": {"type": "imessage", "interval": 99999999999999999999, "enabled": False}}}  # fmt: skip
    cfg = config.parse(doc, tmp_path / "c.toml")
    cfg.sources["good"].check()
    for name, key in (("notype", "type"), ("late", "start"), ("huge", "interval")):
        with pytest.raises(ConfigError, match=f"key 'sources.{name}.{key}'"):
            cfg.sources[name].check()
    assert cfg.sources["huge"].enabled is False and cfg.sources["huge"].interval == 60
    assert config.parse({"sources": {"a": {"type": "imessage", "interval": 300, "start": "x"}}}, None).sources["a"].interval == 300


def test_poll_all_status_and_cron_go_on_beside_a_broken_section(tmp_path: Path) -> None:
    """poll --all stores the healthy source and fails the broken one (exit 2); status shows it CONFIG; cron lists both."""
    imessage_samples.build(tmp_path / "a.db", 4, seed=1)
    cfg = write_config(tmp_path, {"good": {"type": "imessage", "db": "a.db"}, "bad": {"type": "imessage", "interval": "sixty"}})
    out = run_cli("poll", "--all", config=cfg)
    assert out.returncode == 2 and "sources.bad.interval" in out.stderr
    assert read_log(tmp_path / "state", "good")[-1]["new"] == 4
    rows = {r["source"]: r for r in json.loads(run_cli("status", "--json", config=cfg).stdout)}
    assert rows["good"]["state"] == "OK" and rows["bad"]["state"] == "CONFIG" and "sources.bad.interval" in rows["bad"]["state_reason"]
    out = run_cli("cron", config=cfg)
    assert out.returncode == 0 and "poll good" in out.stdout and "poll bad" in out.stdout and "sources.bad.interval" in out.stderr


def test_watch_goes_on_for_the_healthy_source_and_reports_the_broken_one(tmp_path: Path) -> None:
    """``memex watch good bad``: bad's config error is logged once, good is watched and its new mail stored; SIGTERM exits 0."""
    from tests.core.test_watch import STORED_WITHIN, stop, stored_ids, watching

    root = make_maildir(tmp_path / "Maildir")
    cfg = write_config(tmp_path, {"good": {"type": "maildir", "path": str(root), "settle_seconds": 0, "interval": 3600},
                                  "bad": {"type": "maildir", "path": str(root), "interval": 99999999999999999999}})  # fmt: skip
    state = tmp_path / "state"
    with watching(cfg, "good", "bad") as proc:
        wait_until(lambda: [e for e in read_log(state, "good") if e["event"] == "watch.start"], STORED_WITHIN, "good's watch.start")
        deliver(root, "1.host", mail(1))
        wait_until(lambda: stored_ids(state), STORED_WITHIN, "the mail of the healthy source")
        stop(proc)
    errors = [e for e in read_log(state, "bad") if e["event"] == "watch.config_error"]
    assert len(errors) == 1 and "sources.bad.interval" in errors[0]["error"] and "at most" in errors[0]["error"]
    assert "Traceback" not in (tmp_path / "watch.stderr").read_text()


def test_a_watcher_thread_that_dies_stops_watch_with_exit_1_never_a_silent_gap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in one source's watch loop is logged (watch.died) and stops the whole watcher with WatcherDied (exit 1)."""
    from memex import watch as watch_module

    root = make_maildir(tmp_path / "Maildir")
    cfg = config.load(write_config(tmp_path, {"md": {"type": "maildir", "path": str(root), "interval": 3600}}))

    def broken_run(self: watch_module.SourceWatch) -> None:
        raise OverflowError("timeout value is too large")

    monkeypatch.setattr(watch_module.SourceWatch, "run", broken_run)
    stop_event = threading.Event()
    timer = threading.Timer(120, stop_event.set)  # a deadline: never hang the suite if the death went unnoticed
    timer.start()
    try:
        with pytest.raises(watch_module.WatcherDied) as info:
            watch_module.watch(cfg, ["md"], stop=stop_event)
    finally:
        timer.cancel()
    assert "md: its watcher stopped" in str(info.value) and "OverflowError" in str(info.value) and info.value.exit_code == 1
    assert [e["event"] for e in read_log(tmp_path / "state", "md")].count("watch.died") == 1


def test_index_rebuild_of_an_unknown_source_leaves_no_row(tmp_path: Path) -> None:
    """``memex index rebuild nosuch`` is exit 2 and ``index status`` then lists no ``nosuch`` row; a stored, unconfigured one rebuilds."""
    imessage_samples.build(tmp_path / "a.db", 3, seed=1)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": "a.db"}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    out = run_cli("index", "rebuild", "nosuch", config=cfg)
    assert out.returncode == 2 and "no source named 'nosuch' in the config or the store" in out.stderr
    rows = json.loads(run_cli("index", "status", "--json", config=cfg).stdout)
    assert [r["source"] for r in rows] == ["imessage"]
    cfg.write_text(cfg.read_text().replace("[sources.imessage]", "[sources.renamed]"))
    assert run_cli("index", "rebuild", "imessage", config=cfg).returncode == 0  # in the store, no longer configured


def test_cursor_set_null_is_a_reset_and_asks_like_one(tmp_path: Path) -> None:
    """``cursor set SOURCE null`` without --yes off a terminal is exit 2 (cursor kept); with --yes it resets, logged as such."""
    imessage_samples.build(tmp_path / "a.db", 3, seed=1)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": "a.db"}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    out = run_cli("cursor", "set", "imessage", "null", config=cfg)
    assert out.returncode == 2 and "pass --yes" in out.stderr
    assert json.loads(run_cli("cursor", "show", "imessage", "--json", config=cfg).stdout) is not None
    assert run_cli("cursor", "set", "imessage", "null", "--yes", config=cfg).returncode == 0
    assert json.loads(run_cli("cursor", "show", "imessage", "--json", config=cfg).stdout) is None
    assert read_log(tmp_path / "state", "imessage")[-1]["event"] == "cursor.reset"


def test_a_missing_maildir_folder_is_a_warning_and_the_rest_is_polled(tmp_path: Path) -> None:
    """``folders = ["INBOX", "NoSuchFolder"]``: one warning naming it per poll, INBOX's mail stored, exit 0."""
    root = make_maildir(tmp_path / "Maildir")
    deliver(root, "1.host", mail(1))
    cfg = write_config(tmp_path, {"md": {"type": "maildir", "path": str(root), "folders": ["INBOX", "No*Such"], "settle_seconds": 0}})
    out = run_cli("poll", "md", config=cfg)
    assert out.returncode == 0 and out.stderr.count("\n") == 1 and "'No*Such' matches no folder" in out.stderr
    assert read_log(tmp_path / "state", "md")[-1]["new"] == 1


def test_demo_creates_its_folder_private_and_refuses_a_config_pointing_out(tmp_path: Path) -> None:
    """A fresh demo folder is 0700 with everything inside it; a config there with state_dir outside is refused, nothing made."""
    out = run_cli("demo", "--dir", str(tmp_path / "demo"), "--messages", "3")
    assert out.returncode == 0, out.stderr
    assert stat.S_IMODE(os.stat(tmp_path / "demo").st_mode) == 0o700 and sorted(os.listdir(tmp_path)) == ["demo"]
    (tmp_path / "demo" / "config.toml").write_text(f'state_dir = "{tmp_path / "elsewhere"}"\n')
    out = run_cli("demo", "--dir", str(tmp_path / "demo"))
    assert out.returncode == 2 and "points outside the demo folder" in out.stderr and not (tmp_path / "elsewhere").exists()
