"""How memex speaks HTTP to the web services around it: OAuth token endpoints, Microsoft Graph and heartbeat pings.

One library, ``requests`` (already installed with MSAL), and one rule for each of the three things every caller
used to choose for itself:

- **CA bundle**: requests' own rule: ``REQUESTS_CA_BUNDLE`` (or ``CURL_CA_BUNDLE``) when set, else certifi's
  bundle, so a corporate CA set once is honoured by every sign-in, every Graph request and every heartbeat.
- **Timeout**: every request has one, in seconds (:data:`TIMEOUT` unless the caller's deadline leaves less); a
  caller bounded by a poll's :class:`~memex.deadline.Deadline` passes ``deadline.timeout(...)``.
- **Retries**: :func:`retry_delay` (a server's ``Retry-After`` when it gave one, else the caller's backoff steps);
  what a request that never got an answer was is :func:`unreachable` (no URL, no body: they may carry a token).

The S3 store does not come through here: its lean client speaks HTTP/1.1 on its own wire (:mod:`memex.s3.connection`),
for the reasons and figures in docs/benchmarks.md. ``requests`` is imported when the first request is made, never at
import, so an idle poll does not pay for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TIMEOUT = 30.0  # seconds for one request, when nothing tighter bounds it
USER_AGENT = "memex"


def session() -> Any:
    """A new ``requests.Session`` (kept-alive connections for a caller that makes many requests), libraries' log
    records routed into memex's (:mod:`memex.liblog`)."""
    import requests

    from memex.liblog import route_library_logs

    route_library_logs()
    s = requests.Session()
    s.headers["User-Agent"] = USER_AGENT
    return s


def post(url: str, *, data: Any = None, headers: dict[str, str] | None = None, timeout: float = TIMEOUT) -> Any:
    """POST ``data`` (bytes, or a form as a dict) to ``url`` in a session of its own; the response (any status).
    A request that got no answer raises ``requests.RequestException`` (:func:`unreachable` says what it was)."""
    with session() as s:
        return s.post(url, data=data, headers=headers or {}, timeout=timeout)


def request_errors() -> tuple[type[BaseException], ...]:
    """The exceptions of a request that got no answer (imported with requests, so only a caller that sent one asks)."""
    import requests

    return (requests.RequestException,)


def unreachable(exc: BaseException) -> str:
    """What a request that got no answer was, in words (``timed out``, ``network error (ConnectionError)``): never its
    message, which may quote the URL and its query (a token, a code)."""
    import requests

    return "timed out" if isinstance(exc, requests.Timeout) else f"network error ({type(exc).__name__})"


def retry_delay(attempt: int, backoff: Sequence[float], retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (0 first): the server's ``Retry-After`` when it gave one, else
    ``backoff``'s step for it (its last step from then on; 0 with no steps)."""
    if retry_after is not None:
        return retry_after
    return backoff[min(attempt, len(backoff) - 1)] if backoff else 0.0
