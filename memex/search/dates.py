"""The dates a query names: ``after:``/``before:`` days and notmuch's ``date:SINCE..UNTIL`` ranges, in UTC.

A date is read as the span of time it names: ``2010`` the whole year, ``2009-11`` the month, ``2009-11-17`` the
day, ``@1258502400`` that second, ``today``/``yesterday`` those days, ``now`` this second, and a relative date
(``2w``, ``3days``, ``5M2d``, ``1y``: units y, M (months), w, d, h, m (minutes), s, spelled out or cut short as in
notmuch) the moment that long ago. A range runs from the start of its first date's span to the end of its last
(``date:2010..2012``: 2010-01-01 up to the end of 2012); an empty side is open (``date:..1999``, ``date:2w..``);
``date:X`` alone is ``date:X..X``. Times are seconds since the epoch, negative before 1970.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

_ABSOLUTE = re.compile(r"(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?")
_RELATIVE = re.compile(r"(\d+)\s*([A-Za-z]+)")
DAY = 86400
_UNITS = (  # (names a unit may be cut down to, from the shortest, and its length in seconds; months and years apart)
    ("years", 0), ("months", 0), ("weeks", 7 * 86400), ("days", 86400), ("hours", 3600), ("hrs", 3600),
    ("minutes", 60), ("mins", 60), ("seconds", 1), ("secs", 1),
)  # fmt: skip


def _days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to that day of the proleptic Gregorian calendar (negative before; no ``calendar``
    import, which brings ``locale``, on a search's path)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _timegm(year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0) -> float:
    """Seconds since the epoch of that UTC time (``calendar.timegm``)."""
    return float(_days(year, month, day) * DAY + hour * 3600 + minute * 60 + sec)


def _month_days(year: int, month: int) -> int:
    """How many days ``month`` of ``year`` has."""
    return _days(year + month // 12, month % 12 + 1, 1) - _days(year, month, 1)


class DateError(ValueError):
    """A date that cannot be read (the message says what was expected)."""


def _unit(name: str) -> str:
    """The unit ``name`` names (``M`` months, ``m`` minutes; otherwise any prefix of a unit's name, in any case)."""
    if name == "M":
        return "months"
    if name == "m":
        return "minutes"
    for unit, _ in _UNITS:
        if unit.startswith(name.lower()):
            return unit
    raise DateError(f"{name!r} is no unit (y, M, w, d, h, m, s)")


def _ago(n: int, unit: str, now: float) -> float:
    """The moment ``n`` units before ``now``."""
    if unit in ("years", "months"):
        t = time.gmtime(now)
        months = t.tm_year * 12 + (t.tm_mon - 1) - (n * 12 if unit == "years" else n)
        year, month = divmod(months, 12)
        day = min(t.tm_mday, _month_days(year, month + 1))
        return _timegm(year, month + 1, day, t.tm_hour, t.tm_min, t.tm_sec)
    return now - n * dict(_UNITS)[unit]


def span(text: str, now: float) -> tuple[float, float]:
    """The span ``[start, end)`` a date names (see the module docstring); :class:`DateError` when it names none."""
    value = text.strip()
    lower = value.lower()
    if lower == "now":
        return now, now + 1
    if lower in ("today", "yesterday"):
        start = now - now % DAY - (DAY if lower == "yesterday" else 0)
        return start, start + DAY
    if value.startswith("@"):
        try:
            at = int(value[1:])
        except ValueError:
            raise DateError("@ must be followed by seconds since 1970") from None
        return float(at), float(at + 1)
    m = _ABSOLUTE.fullmatch(value)
    if m:
        year, month, day = int(m.group(1)), m.group(2), m.group(3)
        if month is None:
            return _timegm(year, 1, 1), _timegm(year + 1, 1, 1)
        mon = int(month)
        if not 1 <= mon <= 12:
            raise DateError("no such month")
        if day is None:
            return _timegm(year, mon, 1), _timegm(year + mon // 12, mon % 12 + 1, 1)
        d = int(day)
        if not 1 <= d <= _month_days(year, mon):
            raise DateError("no such day")
        start = _timegm(year, mon, d)
        return start, start + DAY
    parts = _RELATIVE.findall(value)
    if parts and "".join(n + u for n, u in parts) == re.sub(r"\s+", "", value):
        when = now
        for n, unit in parts:
            when = _ago(int(n), _unit(unit), when)
        return when, when + 1
    raise DateError("write YYYY, YYYY-MM, YYYY-MM-DD, @SECONDS, today, yesterday, now or N units ago (2w, 3d, 1y)")


def day(value: str) -> float:
    """The start of the UTC day ``YYYY-MM-DD`` (``after:``/``before:``); :class:`DateError` otherwise."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise DateError("write it as YYYY-MM-DD")
    return span(value, 0.0)[0]


def date_range(value: str, now: Callable[[], float] = time.time) -> tuple[float | None, float | None]:
    """``date:SINCE..UNTIL`` (or ``date:X``) as ``(start, end)``, end excluded, None where open."""
    if ".." in value:
        since, _, until = value.partition("..")
        if ".." in until:
            raise DateError("one .. between two dates")
    else:
        since = until = value
    if not since and not until:
        raise DateError("give a date on at least one side of ..")
    at = now()
    start = span(since, at)[0] if since else None
    end = span(until, at)[1] if until else None
    return start, end
