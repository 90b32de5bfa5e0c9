"""Configuration: one TOML file, found and validated once.

Lookup order: ``--config PATH``, then ``$MEMEX_CONFIG``, then the platform's
user config folder (``$XDG_CONFIG_HOME/memex/config.toml``, by default
``~/.config/memex/config.toml``; on macOS
``~/Library/Application Support/memex/config.toml``).

Global keys and every source's common keys are checked at load. A source's
type-specific keys are checked by its poller type when that source is first
used, so one broken source section is reported for that source only and
never stops the others (each poller module is imported only when needed).
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memex.errors import ConfigError
from memex.urls import endpoint_url, file_url, s3_url

CONFIG_ENV = "MEMEX_CONFIG"
PEOPLE_FILE = "people.toml"  # your decisions about who is who, beside the config (memex.people)
SOURCE_COMMON_KEYS = ("type", "enabled", "start", "interval", "heartbeat_url")
# Seconds between polls for a type when its section sets no `interval` (Graph throttles chatty clients).
TYPE_INTERVALS: dict[str, int] = {"teams": 300}
MAX_INTERVAL = 30 * 86400  # a source's `interval` at most (seconds): longer is a typo, and a timer that long overflows
_GLOBAL_KEYS = (
    "state_dir",
    "store",
    "sources",
    "log_max_bytes",
    "log_backups",
    "metrics_textfile",
    "state_url",
    "lease_seconds",
    "search_index",
    "search_stemming",
    "people",
)
_STORE_KEYS = ("url", "endpoint_url", "region", "profile", "client")
_MISSING: Any = object()


def home(needed_for: str, fix: str) -> Path:
    """``$HOME`` as a path; empty or unset is a ConfigError (it would put ``~/...`` at ``/...``), naming what needed it."""
    value = os.environ.get("HOME")
    if not value:
        how = "empty" if value is not None else "not set"
        raise ConfigError(f"HOME is {how}, and {needed_for} is inside it; set HOME to your home folder, or {fix}")
    return Path(value)


def user_config_path() -> Path:
    """The platform's default config file path."""
    fix = "pass --config PATH / set $MEMEX_CONFIG"
    if sys.platform == "darwin":
        return home("the default config file", fix) / "Library" / "Application Support" / "memex" / "config.toml"
    base = os.environ.get("XDG_CONFIG_HOME") or str(home("the default config file ~/.config/memex/config.toml", fix) / ".config")
    return Path(base) / "memex" / "config.toml"


def user_state_dir(path: Path | None = None) -> Path:
    """The platform's default state folder (used when the config names none)."""
    fix = f"set state_dir in {path or 'the config'}"
    if sys.platform == "darwin":
        return home("the default state folder", fix) / "Library" / "Application Support" / "memex" / "state"
    base = os.environ.get("XDG_STATE_HOME") or str(home("the default state folder ~/.local/state/memex", fix) / ".local" / "state")
    return Path(base) / "memex"


@dataclass(frozen=True)
class StoreConfig:
    """Where objects go: ``file:///path`` or ``s3://bucket/prefix``."""

    url: str
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    client: str = "lean"  # S3 request path: "lean" (memex.s3.lean) or "boto3"


@dataclass(frozen=True)
class SourceConfig:
    """One ``[sources.NAME]`` section: common keys checked, the rest kept for the poller type."""

    name: str
    type: str
    path: Path | None
    options: Mapping[str, Any]
    enabled: bool = True
    start: str = "beginning"
    interval: int = 60
    heartbeat_url: str | None = None
    state_dir: Path | None = None  # the config's state folder, for a poller that keeps private files (a login's token cache)
    problem: ConfigError | None = field(default=None, compare=False)  # a common key is wrong: only this source stops

    def check(self) -> None:
        """Raise this section's config error (a common key is wrong), if any; a poller type checks its own keys."""
        if self.problem is not None:
            error = ConfigError(str(self.problem))
            error.path, error.key = self.problem.path, self.problem.key
            raise error

    def keys(self) -> Keys:
        """A checked reader over this section's type-specific keys."""
        return Keys(self.options, path=self.path, prefix=f"sources.{self.name}", base_dir=_base_dir(self.path))


@dataclass(frozen=True)
class Config:
    """The whole configuration, validated."""

    path: Path | None
    state_dir: Path
    store: StoreConfig
    sources: dict[str, SourceConfig] = field(default_factory=dict)
    log_max_bytes: int = 10 * 1024 * 1024
    log_backups: int = 5
    metrics_textfile: Path | None = None  # Prometheus textfile; None: <state_dir>/metrics/memex.prom
    state_url: str | None = None  # s3://bucket/prefix: cursors and leases shared by hosts (memex.state.s3state, .s3lease)
    lease_seconds: int = 90  # a run lease not renewed for this long (server clock) may be taken over
    search_index: bool = True  # polls and backfills keep the search index (memex.search) in step
    search_stemming: str = "english"  # words found by their stems (FTS5's porter), or "none"; set when an index is made
    people: Mapping[str, Any] = field(default_factory=dict)  # the [people] table, checked by memex.people when used

    def source(self, name: str) -> SourceConfig:
        """The named source, or a ConfigError listing the configured ones."""
        try:
            return self.sources[name]
        except KeyError:
            known = ", ".join(sorted(self.sources)) or "none"
            raise ConfigError(f"no source named {name!r} (configured: {known})", path=self.path, key=f"sources.{name}") from None


def find_config(explicit: str | os.PathLike[str] | None) -> Path:
    """Resolve which config file to read (it need not exist yet)."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser()
    return user_config_path()


def load(explicit: str | os.PathLike[str] | None = None) -> Config:
    """Find, read and validate the configuration; raise ConfigError (exit 2) on any fault."""
    path = find_config(explicit)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"no config file; create one (see README) or pass --config PATH / set ${CONFIG_ENV}", path=path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config ({exc.strerror})", path=path) from None
    if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark: TOML forbids it, Windows editors write it
        raw = raw[3:]
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("config is not UTF-8 text", path=path) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", path=path) from None
    return parse(doc, path)


def parse(doc: Mapping[str, Any], path: Path | None) -> Config:
    """Validate a parsed TOML document."""
    top = Keys(doc, path=path, prefix="", base_dir=_base_dir(path))
    state_dir = top.path("state_dir", default=None) or user_state_dir(path)
    log_max_bytes = top.number("log_max_bytes", default=10 * 1024 * 1024, minimum=4096, maximum=1 << 40)
    log_backups = top.number("log_backups", default=5, minimum=1, maximum=1000)
    metrics_textfile = top.path("metrics_textfile", default=None)
    state_url = top.text("state_url", default=None)
    if state_url is not None:
        s3_url(state_url, path=path, key="state_url", what="cursors and leases shared by several hosts")
    lease_seconds = top.number("lease_seconds", default=90, minimum=2, maximum=3600)
    search_index = top.flag("search_index", default=True)
    search_stemming = top.text("search_stemming", default="english")
    if search_stemming not in ("english", "none"):
        raise ConfigError(f'must be "english" or "none", not {search_stemming!r} (FTS5 stems English only)', path=path,
                          key="search_stemming")  # fmt: skip
    people = top.table("people", default={})
    store_table = top.table("store", default={})
    sources_table = top.table("sources", default={})
    top.finish(_GLOBAL_KEYS)

    skeys = Keys(store_table, path=path, prefix="store", base_dir=_base_dir(path))
    url = skeys.text("url", default="") or (state_dir / "store").as_uri()
    if url[:5].lower() == "file:":
        url = file_url(url, path=path, key="store.url")
    elif url.startswith("s3://"):
        s3_url(url, path=path, key="store.url", what="the store's bucket and prefix")
    elif "://" not in url:
        url = (_base_dir(path) / _expand(url, skeys, "url")).resolve().as_uri()
    else:
        raise ConfigError(f"unsupported store URL {url!r}; use file:///path or s3://bucket/prefix", path=path, key="store.url")
    endpoint = skeys.text("endpoint_url", default=None)
    store = StoreConfig(
        url=url,
        endpoint_url=None if endpoint is None else endpoint_url(endpoint, path=path, key="store.endpoint_url"),
        region=skeys.text("region", default=None),
        profile=skeys.text("profile", default=None),
        client=skeys.text("client", default="lean"),
    )
    if store.client not in ("lean", "boto3"):
        raise ConfigError(f'must be "lean" or "boto3", not {store.client!r}', path=path, key="store.client")
    skeys.finish(_STORE_KEYS)

    sources: dict[str, SourceConfig] = {}
    for name, table in sources_table.items():
        _check_source_name(name, path)  # names name files: a bad one is not isolated, it stops the load
        try:
            sources[name] = _source(name, table, path, state_dir)
        except ConfigError as exc:  # one broken section stops only its own source (make_poller raises ``problem``)
            sources[name] = _broken_source(name, table, path, state_dir, exc)
    for name, source in list(sources.items()):  # `into` names the source whose records these are: it must be one
        into = source.options.get("into")
        if isinstance(into, str) and into != name and into not in sources_table:
            known = ", ".join(sorted(sources)) or "none"
            problem = ConfigError(f"no source named {into!r} in this config (configured: {known}); `into` names the mail "
                                  "source these mails are stored under: fix the name, or leave `into` out", path=path,
                                  key=f"sources.{name}.into")  # fmt: skip
            sources[name] = _broken_source(name, sources_table[name], path, state_dir, problem)
    return Config(path=path, state_dir=state_dir, store=store, sources=sources, log_max_bytes=log_max_bytes, log_backups=log_backups,
                  metrics_textfile=metrics_textfile, state_url=state_url, lease_seconds=lease_seconds,
                  search_index=search_index, search_stemming=search_stemming, people=people)  # fmt: skip


def _source(name: str, table: Any, path: Path | None, state_dir: Path) -> SourceConfig:
    """One ``[sources.NAME]`` section with its common keys checked (a ConfigError naming the first bad key)."""
    if not isinstance(table, dict):
        raise ConfigError("must be a table ([sources.NAME])", path=path, key=f"sources.{name}")
    keys = Keys(table, path=path, prefix=f"sources.{name}", base_dir=_base_dir(path))
    stype = keys.text("type")
    start = keys.text("start", default="beginning")
    if start not in ("beginning", "now"):
        raise ConfigError(f'must be "beginning" or "now", not {start!r}', path=path, key=f"sources.{name}.start")
    return SourceConfig(
        name=name,
        type=stype,
        path=path,
        options={k: v for k, v in table.items() if k not in SOURCE_COMMON_KEYS},
        enabled=keys.flag("enabled", default=True),
        start=start,
        interval=keys.number("interval", default=TYPE_INTERVALS.get(stype, 60), minimum=1, maximum=MAX_INTERVAL),
        heartbeat_url=_heartbeat_url(keys, path, name),
        state_dir=state_dir,
    )


def _broken_source(name: str, table: Any, path: Path | None, state_dir: Path, problem: ConfigError) -> SourceConfig:
    """A section whose common keys are wrong: its valid ones kept (a scheduler still knows its interval), ``problem`` set."""
    got = table if isinstance(table, dict) else {}
    stype, enabled, interval = got.get("type"), got.get("enabled"), got.get("interval")
    stype = stype if isinstance(stype, str) else "?"
    if not (isinstance(interval, int) and not isinstance(interval, bool) and 1 <= interval <= MAX_INTERVAL):
        interval = TYPE_INTERVALS.get(stype, 60)
    return SourceConfig(name=name, type=stype, path=path, options={}, enabled=enabled if isinstance(enabled, bool) else True,
                        interval=int(interval), state_dir=state_dir, problem=problem)  # fmt: skip


def _heartbeat_url(keys: Keys, path: Path | None, name: str) -> str | None:
    """The source's heartbeat URL, checked (http/https and a host); the URL itself never goes into a message (it is a secret)."""
    from urllib.parse import urlsplit

    url: str | None = keys.text("heartbeat_url", default=None)
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError("must be an http:// or https:// URL with a host (the value is not shown: it is a secret)",
                          path=path, key=f"sources.{name}.heartbeat_url")  # fmt: skip
    return url


def _check_source_name(name: str, path: Path | None) -> None:
    ok = name and all(c.isalnum() or c in "-_." for c in name) and not name.startswith(".")
    if not ok:
        raise ConfigError(
            "source names may hold only letters, digits, '-', '_' and '.' (they name files and keys)",
            path=path,
            key=f"sources.{name}",
        )


def _expand(value: str, keys: Keys, key: str) -> Path:
    """``value`` as a path with a leading ``~`` expanded; with HOME empty or unset that is an error naming the key."""
    if value == "~" or value.startswith("~/"):
        try:
            return home(f"{keys._full(key)} ({value})", "give an absolute path") / value[2:]
        except ConfigError as exc:
            raise keys.error(key, str(exc)) from None
    return Path(value).expanduser()


def _base_dir(path: Path | None) -> Path:
    """The folder relative paths in the config are taken from: the config file's own, made absolute."""
    return path.parent.absolute() if path is not None else Path.cwd()


class Keys:
    """Reads typed keys from one TOML table, with errors naming the file and the dotted key."""

    def __init__(self, table: Mapping[str, Any], *, path: Path | None, prefix: str, base_dir: Path) -> None:
        self.data = table
        self.file = path
        self.prefix = prefix
        self.base_dir = base_dir
        self.seen: set[str] = set()

    def _full(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def error(self, key: str, message: str) -> ConfigError:
        """A ConfigError for ``key`` in this table."""
        return ConfigError(message, path=self.file, key=self._full(key))

    def _get(self, key: str, default: Any, kind: type | tuple[type, ...], what: str) -> Any:
        self.seen.add(key)
        if key not in self.data:
            if default is _MISSING:
                raise self.error(key, "required key is missing" + self._typo_of(key))
            return default
        value = self.data[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(key, f"must be {what}, not {type(value).__name__} {value!r}")
        return value

    def _typo_of(self, key: str) -> str:
        """A key of this table that looks like a typo of the missing ``key`` (``pathh`` for ``path``), said as a hint,
        or "": the typo is named even where the missing key is found first (a required key before :meth:`finish`)."""
        import difflib

        near = difflib.get_close_matches(key, [k for k in self.data if isinstance(k, str) and k not in self.seen], n=1, cutoff=0.6)
        return f"; the table has {near[0]!r}: rename it to {key!r}" if near else ""

    def text(self, key: str, default: Any = _MISSING) -> Any:
        """A string value."""
        return self._get(key, default, str, "a string")

    def flag(self, key: str, default: Any = _MISSING) -> Any:
        """A boolean value."""
        return self._get(key, default, bool, "true or false")

    def number(self, key: str, default: Any = _MISSING, *, minimum: int | None = None, maximum: int | None = None) -> Any:
        """An integer value within optional bounds."""
        value = self._get(key, default, int, "an integer")
        if isinstance(value, int) and not isinstance(value, bool):
            if minimum is not None and value < minimum:
                raise self.error(key, f"must be at least {minimum}, not {value}")
            if maximum is not None and value > maximum:
                raise self.error(key, f"must be at most {maximum}, not {value}")
        return value

    def strings(self, key: str, default: Any = _MISSING) -> Any:
        """A list of strings (a single string is accepted as a one-item list)."""
        value = self._get(key, default, (list, str), "a list of strings")
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise self.error(key, "must be a list of strings")
        return value

    def table(self, key: str, default: Any = _MISSING) -> Any:
        """A sub-table."""
        return self._get(key, default, dict, "a table")

    def path(self, key: str, default: Any = _MISSING) -> Any:
        """A filesystem path; ``~`` is expanded and a relative path is taken from the config file's folder."""
        value = self.text(key, default)
        if not isinstance(value, str):
            return value
        if not value:
            raise self.error(key, "must not be empty")
        return self.base_dir / _expand(value, self, key)

    def finish(self, allowed: tuple[str, ...] = ()) -> None:
        """Reject keys nobody read (typos), naming the first and listing the known ones."""
        known = self.seen | set(allowed)
        for key in self.data:
            if key not in known:
                names = ", ".join(sorted(known)) or "none"
                raise self.error(key, f"unknown key (known here: {names}); fix or remove it")
