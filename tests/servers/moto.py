"""moto's S3 server, with each request handled whole under one lock, as real S3 makes a conditional write atomic.

``python -m moto.server`` serves requests in threads and checks ``If-Match`` / ``If-None-Match`` before it
writes, without a lock: two conditional PUTs arriving together can both pass the check (a loaded machine
showed it: 4 processes x 25 compare-and-swap updates ended with one lost). Real S3 evaluates the condition
and the write as one step. This wrapper keeps moto's own application and request handler and only serialises
requests, so what the tests see is moto's S3 with S3's atomicity. Run as ``python -m tests.servers.moto HOST PORT``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any


def main() -> None:
    """Serve moto's S3 on HOST PORT (argv) until SIGTERM."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def atomic(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with lock:  # the whole request, body included, before the next one starts
            return list(app(environ, start_response))

    run_simple(host, port, atomic, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
