"""The Microsoft Graph HTTP client of the Teams poller: paging, throttling, retries and the bearer token.

* Every request carries ``Authorization: Bearer`` only when its URL is under
  the configured Graph base URL (an ``@odata.nextLink`` or an image URL that
  points elsewhere never receives the token).
* 429 and 503 wait the server's ``Retry-After`` (seconds, or an HTTP-date
  counted from the answer's ``Date``: a proxy may send one), other 5xx,
  connection errors and timeouts back off (:data:`BACKOFF`); a wait that
  would run past the poll's deadline raises :class:`GraphUnavailable` (that
  chat fails, the others go on).
* Every exchange (and MSAL's token refresh) is bounded by the poll's
  :class:`~memex.deadline.Deadline`: socket timeouts capped to the time left,
  the request run through ``deadline.call`` so SIGTERM or the end of the time
  stops the wait (raising :class:`~memex.deadline.Interrupted`, which ends the
  poll with its progress saved).
* 401 refreshes the token once (MSAL, silently) and retries; a second 401
  raises :class:`~memex.errors.AuthRequired`.
* Errors name the request by its path only (no query: ``$skiptoken`` values
  are opaque server state) and never quote a response body.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

from memex.plugin import AuthRequired, Deadline, SourceError, http_client

BACKOFF: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0)  # seconds between retries of a 5xx or a network error
MAX_RETRY_AFTER = 300.0  # a larger Retry-After is taken as this (the deadline still bounds it)
PREFER = "include-unknown-enum-members"  # system messages arrive with their real messageType


class GraphUnavailable(SourceError):
    """A request still failed after the retries the poll's deadline allowed (the caller keeps its cursor)."""


class NotFound(SourceError):
    """Graph answered 404 (a chat left, an image removed)."""


class Gone(SourceError):
    """Graph answered 410: a delta token expired (the channel is synced again from the start)."""


def where(url: str) -> str:
    """A URL's path only, for errors and logs (the query may hold opaque server tokens)."""
    return urlsplit(url).path or "/"


class Graph:
    """A small Graph client over one ``requests`` session."""

    def __init__(
        self,
        base_url: str,
        token: Callable[[bool], str],
        *,
        timeout: float,
        source: str,
        backoff: tuple[float, ...] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._bearer: str | None = None
        self.timeout = timeout
        self.source = source
        self.backoff = backoff
        self.deadline = Deadline(None)  # the poll's (memex.deadline), given by the runner; none for backfill
        self.requests = 0  # HTTP requests sent, for the benchmark
        self.date: str | None = None  # the Date header of the last answer: Graph's clock (start = "now" for channels)
        self.retry_after: float | None = None  # a Retry-After this poll had no time left to wait out: the next poll's lower bound
        self._session: Any = None

    def _http(self) -> Any:
        if self._session is None:
            self._session = http_client.session()
        return self._session

    def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def url(self, path: str) -> str:
        """An absolute URL for a path under the Graph base URL."""
        return self.base_url + path

    def _ours(self, url: str) -> bool:
        return url == self.base_url or url.startswith(self.base_url + "/")

    def _abandon(self) -> None:
        """Drop the session of a request the deadline gave up on (its helper thread then ends soon)."""
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def _wait(self, seconds: float, url: str, why: str, attempt: int) -> None:
        """Back off before a retry: a wait that cannot end before the deadline fails this request (its chat) instead.

        Once the poll must end (its time is up, or it was asked to stop: a request cut short by the deadline lands
        here), that is the poll's end, not this chat's failure: :class:`~memex.deadline.Interrupted`.
        """
        self.deadline.check(f"{self.source}: {where(url)}: {why}")
        if self.deadline.at is not None and seconds >= self.deadline.remaining():
            raise GraphUnavailable(f"{self.source}: {where(url)}: {why}; no time left in this poll to retry (the next poll goes on)")
        if self.deadline.at is None and attempt > len(BACKOFF):  # no time limit (backfill): a bounded number of retries
            raise GraphUnavailable(f"{self.source}: {where(url)}: {why}, {attempt} times in a row; try again later")
        self.deadline.sleep(max(0.0, seconds), f"{self.source}: {where(url)}: waiting to retry ({why})")

    def get(self, url: str, *, binary: bool = False) -> Any:
        """GET ``url`` (absolute, under the base URL) and return its JSON (or bytes), retrying within the deadline."""
        if not self._ours(url):
            raise SourceError(f"{self.source}: Graph sent a link outside {self.base_url} ({urlsplit(url).netloc}); not following it")
        backoff = self.backoff if self.backoff is not None else BACKOFF
        attempt = 0
        refreshed = False
        what = f"{self.source}: GET {where(url)}"
        while True:
            if self._bearer is None:
                self._bearer = self.deadline.call(lambda: self._token(False), f"{self.source}: signing in")
            timeout = self.deadline.timeout(self.timeout, what)
            headers = {"Authorization": f"Bearer {self._bearer}", "Prefer": PREFER, "Accept": "*/*" if binary else "application/json"}
            self.requests += 1
            session = self._http()
            try:
                send = functools.partial(session.get, url, headers=headers, timeout=timeout, allow_redirects=False)
                resp = self.deadline.call(send, what, abandon=self._abandon)
            except http_client.request_errors() as exc:
                why = http_client.unreachable(exc)
                delay = http_client.retry_delay(attempt, backoff)
                attempt += 1
                self._wait(delay, url, why, attempt)
                continue
            status = resp.status_code
            if status == 200:
                self.date = resp.headers.get("Date")
                if binary:
                    return resp.content
                try:
                    return resp.json()
                except ValueError:
                    raise SourceError(f"{self.source}: {where(url)}: Graph answered 200 with a body that is not JSON") from None
            resp.close()
            if status == 401:
                if refreshed:
                    raise AuthRequired(self.source, "Microsoft Graph refused the refreshed token (401)")
                refreshed = True
                self._bearer = self.deadline.call(lambda: self._token(True), f"{self.source}: refreshing the login")
                continue
            if status == 404:
                raise NotFound(f"{self.source}: {where(url)}: not found (404)")
            if status == 410:
                raise Gone(f"{self.source}: {where(url)}: gone (410)")
            if status in (429, 503) or status >= 500:
                retry_after = _retry_after(resp.headers.get("Retry-After"), resp.headers.get("Date"))
                if retry_after is not None and status in (429, 503):
                    delay = http_client.retry_delay(attempt, backoff, retry_after)
                    if self.deadline.at is not None and delay >= self.deadline.remaining():  # memex watch waits it out
                        self.retry_after = max(self.retry_after or 0.0, delay)
                else:
                    delay = http_client.retry_delay(attempt, backoff)
                attempt += 1
                self._wait(delay, url, f"Graph answered {status}", attempt)
                continue
            if status == 403:
                raise SourceError(
                    f"{self.source}: {where(url)}: access denied (403); the app needs consent for its scopes (docs/sources/teams.md)"
                )
            raise SourceError(f"{self.source}: {where(url)}: Graph answered {status}")

    def pages(self, url: str) -> Iterator[tuple[list[dict[str, Any]], str | None, str | None]]:
        """Each page of a collection: ``(value, nextLink, deltaLink)``, following ``@odata.nextLink`` to the end."""
        next_url: str | None = url
        while next_url:
            doc = self.get(next_url)
            if not isinstance(doc, dict) or not isinstance(doc.get("value"), list):
                raise SourceError(f"{self.source}: {where(next_url)}: Graph answered a page without a value list")
            nxt = doc.get("@odata.nextLink")
            delta = doc.get("@odata.deltaLink")
            yield (
                [v for v in doc["value"] if isinstance(v, dict)],
                nxt if isinstance(nxt, str) else None,
                delta if isinstance(delta, str) else None,
            )
            next_url = nxt if isinstance(nxt, str) else None


def _retry_after(value: str | None, date: str | None = None) -> float | None:
    """Retry-After in seconds, capped at :data:`MAX_RETRY_AFTER`; None if absent or unreadable.

    Both forms of RFC 9110: delay-seconds (what Graph sends) and an HTTP-date, which counts from the
    answer's ``Date`` (the server's clock; this machine's when it has none). A date already past means now.
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        at = _http_date(text)
        if at is None:
            return None
        seconds = max(0.0, at - (_http_date(date or "") or time.time()))
    if seconds != seconds or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER)


def _http_date(text: str) -> float | None:
    """An HTTP-date (``Wed, 21 Oct 2015 07:28:00 GMT``) as epoch seconds, or None."""
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, its source unknown
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
