"""The web application: routes, templates and static files behind the security guard, and the server that runs it.

Starlette routes each URL to a :class:`memex.web.views.Views` handler; Jinja2 renders the templates shipped in
``memex/web/templates`` (autoescaping on); the CSS and JS in ``memex/web/static`` are served by memex itself.
:class:`memex.web.security.Guard` wraps it all. :func:`serve` runs it under uvicorn (no access log: a URL can hold
a search's words).
"""

from __future__ import annotations

import functools
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from memex.errors import ConfigError, MemexError
from memex.web.security import ASGIApp, Guard

HERE = Path(__file__).resolve().parent


def environment() -> Any:
    """The Jinja2 environment of the templates: autoescaped, with memex's filters (text shown safely, times, sizes)."""
    import jinja2

    from memex.web import present

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)  # fmt: skip
    env.filters.update(shown=present.shown, body=present.shown_body, when=present.when, size=present.size, anchor=present.anchor,
                       u=present.url_part, kind=present.attachment_kind)  # fmt: skip
    env.globals.update(highlighted=present.highlighted)
    return env


def make_app(archive: Any, sources: list[str], *, hosts: frozenset[str], token: str | None = None) -> ASGIApp:
    """The whole application for ``archive`` (a :class:`memex.read.Archive`), guarded: only ``hosts`` as Host, the
    ``token`` on every request when given."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import FileResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from memex.web.views import Views

    views = Views(archive, environment(), sources)
    from memex.observe.logs import config_logger

    log = config_logger(archive.cfg, "serve", console=sys.stderr)  # logs/serve.jsonl, and stderr off a terminal

    async def favicon(request: Request) -> Response:
        return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")

    def route(path: str, handler: Callable[[Request], Response]) -> Route:
        return Route(path, _guarded(views, handler, log), methods=["GET", "HEAD"])

    routes = [
        route("/", views.conversations),
        route("/conversation/{key:path}", views.conversation),
        route("/message/{key:path}", views.message),
        route("/mail/{key:path}", views.mail_body),
        route("/attachment/{index}/{key:path}", views.attachment),
        route("/search", views.search),
        route("/search/results", views.search_live),
        route("/people", views.people),
        route("/person/{ref:path}", views.person),
        route("/timeline", views.timeline),
        route("/sources", views.sources_page),
        Route("/favicon.ico", favicon, methods=["GET", "HEAD"]),  # what a browser asks for on a page that names none (an image)
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return views.page("error.html", request, status=404, message="Nothing here: no page has this address.")

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    return Guard(app, hosts, token)


def _guarded(views: Any, handler: Callable[[Any], Any], log: Any) -> Callable[[Any], Awaitable[Any]]:
    """``handler`` as an async endpoint (the archive is read on the event loop's thread, one request at a time), its
    errors turned into a page of one line: 400 a bad parameter or query, 404 an unknown key, 503 no index."""
    from memex.errors import MemexError
    from memex.search.parse import QueryError
    from memex.web.views import BadRequest, NotFound

    @functools.wraps(handler)
    async def endpoint(request: Any) -> Any:
        try:
            return handler(request)
        except (BadRequest, QueryError) as exc:
            return views.page("error.html", request, status=400, message=str(exc))
        except NotFound as exc:
            return views.page("error.html", request, status=404, message=str(exc))
        except MemexError as exc:
            return views.page("error.html", request, status=503, message=str(exc))
        except Exception as exc:  # a bug: one log line naming the page and the exception's type, never its text (it may quote a message)
            log.error("web.page_failed", page=handler.__name__, error=type(exc).__name__)
            return views.page("error.html", request, status=500, message=f"This page failed ({type(exc).__name__}): a bug in memex.")

    return endpoint


def server_for(app: ASGIApp, host: str, port: int) -> Any:
    """A uvicorn server for ``app`` on ``host``:``port``: no access log, no ``Server`` header, no proxy headers
    trusted. Its ``run()`` serves until stopped (Ctrl-C, SIGTERM, or ``should_exit`` set from another thread)."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off", server_header=False,
                            date_header=False, proxy_headers=False)  # fmt: skip
    return uvicorn.Server(config)


def shown_host(host: str) -> str:
    """``host`` as it stands before ``:PORT`` in an address (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def listening(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (``SO_REUSEADDR``, as uvicorn binds its own), for uvicorn to listen on.

    Bound here so that what stops it is memex's one line, not uvicorn's log line and exit code 3: a name that is no
    address of this machine (:class:`~memex.errors.ConfigError`, exit 2), a port in use or below 1024 (exit 1)."""
    import errno

    shown = shown_host(host)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else "not a host name"
        raise ConfigError(f"--host {host}: no address of this machine has that name ({reason}); give one, e.g. 127.0.0.1") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ConfigError(f"--host {host}: not an address of this machine; give one of its own, e.g. 127.0.0.1") from None
        if exc.errno == errno.EADDRINUSE:
            reason = "the port is in use (another memex serve?); choose another with --port"
        elif exc.errno == errno.EACCES:
            reason = "ports below 1024 are the system's; choose one above 1024 with --port"
        else:
            reason = exc.strerror or type(exc).__name__
        raise MemexError(f"cannot listen on {shown}:{port}: {reason}") from None
    return sock


def serve(app: ASGIApp, host: str, port: int, *, ready: Callable[[int], None], stopping: Callable[[], None]) -> Any:
    """Run ``app`` on ``host``:``port`` under uvicorn until stopped (Ctrl-C, SIGTERM), on a socket bound first
    (:func:`listening`). ``ready`` is called with the port once it listens (the one the system chose for port 0),
    ``stopping`` once it has stopped serving: uvicorn raises the signal that stopped it again when it is done
    (so a SIGTERM still ends the process as a SIGTERM), and no ``finally`` after :meth:`run` would be reached."""
    sock = listening(host, port)
    bound = sock.getsockname()[1]
    server = server_for(app, host, bound)
    started, finished = server.startup, server.shutdown

    async def startup(sockets: Any = None) -> None:
        await started(sockets=sockets)
        ready(bound)

    async def shutdown(sockets: Any = None) -> None:
        try:
            await finished(sockets=sockets)
        finally:
            stopping()

    server.startup = startup
    server.shutdown = shutdown
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return server
