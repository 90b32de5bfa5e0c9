"""Starting ``memex serve``: the archive opened read-only, the token when asked for, the web server on its address."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from memex.config import Config

if TYPE_CHECKING:
    from memex.read.socket import Render


def build(cfg: Config, *, host: str, use_token: bool, allow_hosts: Iterable[str] = ()) -> tuple[Any, Any, str | None, bool]:
    """The guarded application for ``cfg``, its archive, the token (when ``use_token``) and whether it was made now."""
    from memex.read import open_archive
    from memex.web.app import make_app
    from memex.web.security import allowed_hosts, load_or_make_token

    token, made = load_or_make_token(cfg.state_dir) if use_token else (None, False)
    archive = open_archive(cfg)
    app = make_app(archive, sorted(cfg.sources), hosts=allowed_hosts(host, allow_hosts), token=token)
    return app, archive, token, made


def run(cfg: Config, *, host: str, port: int, use_token: bool, allow_hosts: Iterable[str] = (), say: Callable[[str], None] = print,
        render: Render | None = None) -> None:  # fmt: skip
    """Serve ``cfg``'s archive on ``host``:``port`` until stopped; say where (and the token, the one time it is made);
    ``render``: how the read socket renders a thin client's command line (:data:`memex.read.socket.Render`)."""
    from memex.web.app import serve, shown_host

    app, archive, token, made = build(cfg, host=host, use_token=use_token, allow_hosts=allow_hosts)
    stop_socket = _socket_server(cfg, render)

    def ready(bound: int) -> None:
        url = f"http://{shown_host(host)}:{bound}/"
        if token is not None and made:
            say(f"memex serve: {url}?token={token}  (the token is shown this once; it is kept in {cfg.state_dir / 'web-token'})")
        elif token is not None:
            say(f"memex serve: {url} (open it once with ?token=TOKEN from {cfg.state_dir / 'web-token'})")
        else:
            say(f"memex serve: {url} (Ctrl-C stops it)")

    def stopping() -> None:
        stop_socket()
        archive.close()

    try:
        serve(app, host, port, ready=ready, stopping=stopping)
    finally:
        stopping()  # again (each step does nothing the second time): when uvicorn failed before its shutdown


def _socket_server(cfg: Config, render: Render | None) -> Callable[[], None]:
    """The read model's Unix socket server (:func:`memex.read.socket.serve_socket`): while this runs, ``memex search``
    and ``memex show`` ask it instead of opening the archive themselves. It answers from a thread of its own, on an
    archive of its own. A function that stops it; when the socket cannot be made the commands answer in-process, as
    without a server, and the web view goes on."""
    from memex.read import open_archive
    from memex.read.socket import serve_socket

    try:
        server = serve_socket(open_archive(cfg), cfg.state_dir, render)
    except OSError:
        return lambda: None
    stop: Callable[[], None] = server.close
    return stop
