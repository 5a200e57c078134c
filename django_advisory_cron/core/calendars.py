"""Business calendars: the days a job's ticks skip or keep (``calendar=``).

A calendar is one string, the same in code, settings, the database, ``cronjob`` and the
admin::

    [RULE:]SOURCE[+SOURCE...]

Each ``SOURCE`` names days:

* ``holidays:US``, ``holidays:DE-BY``: the public holidays of a country, or of one of its
  subdivisions (ISO 3166 codes as the ``holidays`` package knows them);
* ``business:FR``, ``business:DE-BY``: the days that are not business days there: the
  country's weekend and its public holidays;
* ``market:NYSE``: the days a market is closed: weekends and the market's holidays (the
  ``holidays`` package's financial calendars);
* ``weekends``: Saturdays and Sundays;
* ``dates:NAME``: only the dates an operator adds (in the admin) under that name.

Dates an operator adds under any source's name (``business:FR``, ``dates:plant``) are days
of that source too. The ``RULE`` says what the ticks do with the calendar's days:

* ``skip`` (the default, so ``"skip:"`` is never needed): a tick on one of them is skipped;
* ``keep``: a tick runs only on one of them;
* ``first``: a tick runs only on the first business day of its month (a business day: not a
  weekend day and not one of the calendar's days);
* ``last``: only on the last business day of its month.

A tick's day is its date in the job's time zone. Every replica answers alike from the job,
the tick and the calendar (and the operator's dates, read from the database): no coordination.
The holiday rules are the ``holidays`` package's, never written here; it is imported only when
a calendar needs it (``pip install 'django-advisory-cron[calendars]'``).
"""

from __future__ import annotations

import calendar as monthly
import functools
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

#: What a calendar's rule may be, and what each does (for refusals and help).
RULES = {
    "skip": "skip the calendar's days",
    "keep": "run only on the calendar's days",
    "first": "run only on the first business day of the month",
    "last": "run only on the last business day of the month",
}
#: The kinds of source, and whether they need the ``holidays`` package.
KINDS = {"holidays": True, "business": True, "market": True, "weekends": False, "dates": False}
#: How the package is installed, said where it is missing.
INSTALL = "pip install 'django-advisory-cron[calendars]'"
#: The longest calendar a schedule stores (``Schedule.calendar``'s ``max_length``).
MAX_CALENDAR = 200
#: Saturday and Sunday (``date.weekday()``), the weekend of ``weekends`` and of a calendar
#: whose package says nothing else.
WEEKEND = frozenset({5, 6})
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: An operator date's name: letters, digits, ``_.-`` (a source name is ``dates:NAME``).
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_LOCK = threading.Lock()

#: Dates an operator added: ``{(source name, date): why}``.
Extra = Mapping[tuple[str, date], str]


class MissingPackage(ValueError):
    """A calendar names public holidays or a market, and ``holidays`` is not installed."""


def package_missing() -> bool:
    """Whether the ``holidays`` package cannot be imported."""
    try:
        import holidays  # noqa: F401
    except ImportError:
        return True
    return False


@dataclass(frozen=True)
class Source:
    """One source of a calendar's days: ``kind`` (``holidays``, ``business``, ``market``,
    ``weekends``, ``dates``) and its ``code`` (``DE-BY``, ``NYSE``, ``plant``; ``""`` for
    ``weekends``)."""

    kind: str
    code: str = ""

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.code}" if self.code else self.kind

    @property
    def closes_weekends(self) -> bool:
        """Whether its days include the weekend (business days and markets)."""
        return self.kind in ("business", "market", "weekends")


@dataclass(frozen=True)
class Calendar:
    """A parsed ``calendar=``: its rule and its sources."""

    rule: str
    sources: tuple[Source, ...]

    @property
    def text(self) -> str:
        """Its spelling, normalised (``skip`` left out)."""
        sources = "+".join(source.name for source in self.sources)
        return sources if self.rule == "skip" else f"{self.rule}:{sources}"

    @property
    def names(self) -> tuple[str, ...]:
        """Its sources' names: where an operator's dates for it are kept."""
        return tuple(source.name for source in self.sources)

    def closed(self, day: date, extra: Extra | None = None) -> str | None:
        """Why ``day`` is one of the calendar's days (``"Christmas Day (holidays:DE-BY)"``),
        or ``None``."""
        for source in self.sources:
            why = _closed_by(source, day, extra or {})
            if why:
                return f"{why} ({source.name})"
        return None

    def _business(self, day: date, extra: Extra) -> bool:
        return _weekend_reason(self.sources, day) is None and self.closed(day, extra) is None

    def skip_reason(self, day: date, extra: Extra | None = None) -> str | None:
        """Why a tick on ``day`` (its date in the job's zone) is skipped, in a few words, or
        ``None``: it runs. ``extra``: the operator's dates, for the whole of ``day``'s month
        with ``first`` and ``last``."""
        extra = extra or {}
        if self.rule == "skip":
            return self.closed(day, extra)
        if self.rule == "keep":
            if self.closed(day, extra) is None:
                return f"not a day of {self.text.removeprefix('keep:')}"
            return None
        weekend = _weekend_reason(self.sources, day)
        if weekend is not None:
            return weekend
        why = self.closed(day, extra)
        if why is not None:
            return why
        wanted = self.business_day_of_month(day.year, day.month, extra)
        if wanted == day:
            return None
        which = "first" if self.rule == "first" else "last"
        said = "none" if wanted is None else wanted.isoformat()
        return f"not the {which} business day of the month ({said})"

    def business_day_of_month(
        self, year: int, month: int, extra: Extra | None = None
    ) -> date | None:
        """The first (rule ``first``) or last (else) business day of a month, or ``None``
        when the month has none."""
        extra = extra or {}
        length = monthly.monthrange(year, month)[1]
        days = [date(year, month, n) for n in range(1, length + 1)]
        if self.rule != "first":
            days.reverse()
        return next((day for day in days if self._business(day, extra)), None)


def _weekend_reason(sources: tuple[Source, ...], day: date) -> str | None:
    """``"Saturday (weekend)"`` when ``day`` is a weekend day of the calendar's country (the
    first source with a country or market says which days; else Saturday and Sunday)."""
    weekend: frozenset[int] = WEEKEND
    for source in sources:
        if source.kind in ("holidays", "business", "market"):
            weekend = frozenset(_days_of(source.kind, source.code).weekend)
            break
    if day.weekday() in weekend:
        return f"{DAY_NAMES[day.weekday()]} (weekend)"
    return None


def _closed_by(source: Source, day: date, extra: Extra) -> str | None:
    added = extra.get((source.name, day))
    if added is not None:
        return added or "added by an operator"
    if source.kind == "dates":
        return None
    if source.closes_weekends:
        weekend = (
            WEEKEND
            if source.kind == "weekends"
            else frozenset(_days_of(source.kind, source.code).weekend)
        )
        if day.weekday() in weekend:
            return DAY_NAMES[day.weekday()]
        if source.kind == "weekends":
            return None
    with _LOCK:  # the package fills a year in on its first look: one thread at a time
        name = _days_of(source.kind, source.code).get(day)
    return None if name is None else str(name)


@functools.lru_cache(maxsize=256)
def _days_of(kind: str, code: str) -> Any:
    """The ``holidays`` package's days of a source (its names in English where it has them)."""
    import holidays

    if kind == "market":
        found = holidays.financial_holidays(code)
    else:
        country, _, subdivision = code.partition("-")
        found = holidays.country_holidays(country, subdiv=subdivision or None)
    languages = getattr(found, "supported_languages", ())
    english = next((lang for lang in ("en_US", "en_GB", "en") if lang in languages), None)
    if english is not None and english != getattr(found, "default_language", None):
        if kind == "market":
            found = holidays.financial_holidays(code, language=english)
        else:
            found = holidays.country_holidays(country, subdiv=subdivision or None, language=english)
    return found


def parse(text: object, *, known: bool = True) -> Calendar:
    """The calendar ``text`` spells. Raises ``ValueError`` in one line for a bad spelling, an
    unknown rule or kind and (with ``known``, when the package is there) a country,
    subdivision or market the ``holidays`` package does not know; ``MissingPackage`` when a
    source needs the package and it is not installed (with ``known``)."""
    if not isinstance(text, str):
        raise ValueError(
            f"the calendar must be text such as 'business:FR', not {type(text).__name__}"
        )
    spelled = text.strip()
    if not spelled:
        raise ValueError("the calendar is empty")
    if len(spelled) > MAX_CALENDAR:
        raise ValueError(f"the calendar is longer than {MAX_CALENDAR} characters")
    rule = "skip"
    head, colon, rest = spelled.partition(":")
    if colon and head.strip() in RULES:
        rule, spelled = head.strip(), rest
    elif colon and head.strip() not in KINDS and "+" not in head:
        rules = ", ".join(RULES)
        raise ValueError(
            f"calendar {text!r}: unknown rule or kind {head.strip()!r} (rules: {rules}; "
            f"kinds: {', '.join(KINDS)})"
        )
    sources = tuple(_source(part.strip(), text, known) for part in spelled.split("+"))
    if len(set(sources)) != len(sources):
        raise ValueError(f"calendar {text!r} names a source twice")
    return Calendar(rule, sources)


def _source(part: str, text: str, known: bool) -> Source:
    kind, colon, code = part.partition(":")
    kind, code = kind.strip(), code.strip()
    if kind not in KINDS:
        raise ValueError(
            f"calendar {text!r}: unknown kind {kind!r} (one of {', '.join(KINDS)}, such as "
            "'holidays:US', 'business:FR', 'market:NYSE', 'weekends', 'dates:plant')"
        )
    if kind == "weekends":
        if colon:
            raise ValueError(f"calendar {text!r}: 'weekends' takes no code")
        return Source(kind)
    if not code:
        raise ValueError(f"calendar {text!r}: {kind!r} needs a code, such as {_example(kind)}")
    if kind == "dates":
        if not _NAME.fullmatch(code):
            raise ValueError(
                f"calendar {text!r}: a dates name is letters, digits and _.- (up to 100), "
                f"not {code!r}"
            )
        return Source(kind, code)
    code = code.upper() if kind == "market" else _country_code(code)
    if known:
        problem = unknown_code(kind, code)
        if problem:
            raise ValueError(f"calendar {text!r}: {problem}")
    return Source(kind, code)


def _country_code(code: str) -> str:
    country, dash, subdivision = code.partition("-")
    return f"{country.upper()}-{subdivision.upper()}" if dash else country.upper()


def _example(kind: str) -> str:
    return {"market": "'market:NYSE'", "dates": "'dates:plant'"}.get(kind, f"'{kind}:US'")


def unknown_code(kind: str, code: str) -> str | None:
    """Why the ``holidays`` package knows no ``code`` of ``kind`` (a country, a country's
    subdivision, a market), or ``None``. Raises ``MissingPackage`` without the package."""
    if package_missing():
        raise MissingPackage(f"the calendar {kind}:{code} needs the holidays package: {INSTALL}")
    import holidays

    if kind == "market":
        markets = holidays.list_supported_financial()
        if code not in markets:
            return (
                f"unknown market {code!r} (the holidays package knows {', '.join(sorted(markets))})"
            )
        return None
    countries = holidays.list_supported_countries()
    country, _, subdivision = code.partition("-")
    if country not in countries:
        return (
            f"unknown country {country!r} (an ISO 3166 code the holidays package knows, "
            "such as US, FR, DE)"
        )
    if subdivision:
        subdivisions = [str(s).upper() for s in countries[country]]
        if subdivision not in subdivisions:
            listed = ", ".join(subdivisions[:40]) + (", ..." if len(subdivisions) > 40 else "")
            return (
                f"unknown subdivision {subdivision!r} of {country} "
                f"({'one of ' + listed if listed else 'it has none'})"
            )
    return None


def problem(text: object, *, known: bool = True) -> str | None:
    """Why ``text`` is no calendar, or ``None`` (see ``parse``)."""
    try:
        parse(text, known=known)
    except ValueError as error:
        return str(error)
    return None


def day_of(tick: datetime, zone: Any) -> date:
    """A tick's date in the job's zone (``zone``: a ``tzinfo``)."""
    return tick.astimezone(zone).date()


def month_span(day: date) -> tuple[date, date]:
    """The first and last days of ``day``'s month: the operator's dates a rule reads."""
    last = monthly.monthrange(day.year, day.month)[1]
    return day.replace(day=1), day.replace(day=last)


def days(start: date, end: date) -> list[date]:
    """The days from ``start`` to ``end``, both included."""
    return [start + timedelta(days=n) for n in range((end - start).days + 1)]
