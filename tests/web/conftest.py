"""The web view's fixtures: the archive, ``memex serve``'s application on loopback in a thread, one browser per session.

The browser is Debian's ``chromium`` (``/usr/bin/chromium``) driven by Playwright from PyPI (its own browser
download is never used). Without it (or without Playwright) the browser tests skip here and fail when ``$CI`` is set,
like the other system-package tests.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from tests.conftest import free_port, patience, wait_until
from tests.web import archive as web_archive

CHROMIUM = os.environ.get("MEMEX_TEST_CHROMIUM", "/usr/bin/chromium")


class Served:
    """An application served by uvicorn on 127.0.0.1 in a thread: its base URL, config, archive and state folder."""

    def __init__(self, cfg: Path, store: Any = None, *, token: bool = False, allow_hosts: tuple[str, ...] = ()) -> None:
        from memex.web.app import server_for
        from memex.web.run import build

        self.cfg = memex_config.load(cfg)
        self.port = free_port()
        self.app, self.archive, self.token, _ = build(self.cfg, host="127.0.0.1", use_token=token, allow_hosts=allow_hosts)
        if store is not None:
            self.archive._store = store
        self.server = server_for(self.app, "127.0.0.1", self.port)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, patience(30), "the web server listening")
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop the server and wait for its thread."""
        self.server.should_exit = True
        self.thread.join(patience(30))


@pytest.fixture(scope="session")
def web_cfg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The archive of :mod:`tests.web.archive`, built once per session (its config)."""
    pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
    return web_archive.build(tmp_path_factory.mktemp("web"))


@pytest.fixture(scope="session")
def served(web_cfg: Path) -> Iterator[Served]:
    """``memex serve``'s application for the archive, on loopback."""
    s = Served(web_cfg)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def long_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The application for the 100,000-message conversation (index rebuilt from records in memory)."""
    pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
    cfg, store = web_archive.long_conversation(tmp_path_factory.mktemp("long"))
    s = Served(cfg, store)
    yield s
    s.stop()


def _need_browser() -> None:
    """Skip (locally) or fail (on CI) when Playwright or Debian's chromium is missing."""
    problem = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problem = "playwright is not installed (pip install -e '.[test]')"
    if problem is None and not (os.access(CHROMIUM, os.X_OK) or shutil.which("chromium")):
        problem = f"no chromium at {CHROMIUM} (apt-get install chromium)"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser tests need it on CI: {problem}")
        pytest.skip(problem)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium for a module's tests (launching is the expensive part). Not for the session: Playwright's
    sync API keeps an event loop running in the worker's thread while it is open, and a later test of another module
    in the same worker that runs its own (``anyio.run``: the MCP tests) then fails with "Already running asyncio"."""
    _need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium"), args=["--no-sandbox"]
        )
        yield b
        b.close()


class Watched:
    """A page whose every request and console message is recorded."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.page = context.new_page()
        self.requests: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.errors.append(f"dialog: {d.message}"), d.dismiss()))

    def foreign(self, base: str) -> list[str]:
        """Every request the page made to anything but ``base`` (``data:`` and ``about:`` aside)."""
        return [u for u in self.requests if not u.startswith(base + "/") and u != base and not u.startswith(("data:", "about:"))]


@pytest.fixture
def page(browser: Any) -> Iterator[Watched]:
    """A fresh context (no cookies) and page at 1280x800, light."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light", accept_downloads=True)
    context.set_default_timeout(patience(15) * 1000)
    yield Watched(context)
    context.close()
