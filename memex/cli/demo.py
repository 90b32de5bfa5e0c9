"""``memex demo``: the whole pipeline on generated sample data, in one folder."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

DEMO_CONFIG = """\
# memex demo configuration (written by `memex demo`)
state_dir = "state"            # cursors.json, locks/, logs/ live here

[store]
url = "store"                  # a local folder mirroring the S3 layout; or "s3://bucket/prefix"

[sources.imessage]
type = "imessage"
db = "chat.db"                 # on a Mac: "~/Library/Messages/chat.db"
"""


def run_demo(directory: Path, messages: int) -> int:
    """Create or extend the demo folder, poll it, print the status table; return the exit code."""
    from memex import config
    from memex.fs_errors import at_path, explain
    from memex.observe.status import collect, render_table
    from memex.registry import sample_for
    from memex.runner import poll

    cfg_path = directory / "config.toml"
    if cfg_path.exists():
        cfg = config.load(cfg_path)
        _inside(cfg, directory.resolve())  # before anything is written: a config there may point anywhere
    else:
        from memex.state.files import make_dirs

        make_dirs(directory.absolute())  # the demo folder and any missing parents: memex's own, 0700
        try:
            cfg_path.write_text(DEMO_CONFIG)
        except OSError as exc:
            at_path(exc, cfg_path)  # a full disk on write names no file (memex.fs_errors)
            raise
        cfg = config.load(cfg_path)
    sample = sample_for("imessage")
    assert sample is not None  # a built-in
    try:
        made = sample(directory / "chat.db", messages)
    except Exception as exc:  # SQLite on a full or read-only disk names no file
        raise (explain(exc, None if isinstance(exc, OSError) else directory / "chat.db") or exc) from None
    print(f"demo: {made}", file=sys.stderr)
    result = poll(cfg, "imessage", console=sys.stderr)
    print(render_table(collect(cfg)))
    print(f"\nobjects are in {cfg.store.url}; config: {cfg_path}", file=sys.stderr)
    return result.exit_code


def _inside(cfg: Any, root: Path) -> None:
    """Refuse (ConfigError, exit 2) a demo config whose state or store lies outside the demo folder ``root``.

    ``memex demo`` writes only inside its own folder: a config left there (or written by hand) that says
    ``state_dir = "/"`` must not make it create folders elsewhere.
    """
    from urllib.parse import unquote, urlsplit

    from memex.errors import ConfigError

    fix = f"memex demo writes only inside {root}; point it inside, or use another --dir"
    places = [("state_dir", cfg.state_dir)]
    if cfg.metrics_textfile is not None:
        places.append(("metrics_textfile", cfg.metrics_textfile))
    url = urlsplit(cfg.store.url)
    if url.scheme != "file":
        raise ConfigError(f"the demo keeps its store in a local folder, not {url.scheme}://; {fix}", path=cfg.path, key="store.url")
    places.append(("store.url", Path(unquote(url.path))))
    if cfg.state_url is not None:
        raise ConfigError(f"the demo keeps its state in its folder, not on S3; {fix}", path=cfg.path, key="state_url")
    for key, place in places:
        where = Path(place).resolve()
        if where != root and root not in where.parents:
            raise ConfigError(f"points outside the demo folder ({where}); {fix}", path=cfg.path, key=key)
