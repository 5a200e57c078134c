"""Business calendars with no server: what a calendar's spelling means, the days it skips or
keeps (the ``holidays`` package's holidays, weekends, operator dates), the first and last
business day of a month, catch-up and the next ticks with a calendar, and the refusals."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from typing import Any

import holidays
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_advisory_cron import locked_task
from django_advisory_cron.core import calendars
from django_advisory_cron.core.calendars import Calendar, Source, parse
from django_advisory_cron.core.schedule import Schedule
from django_advisory_cron.jobs import catchup
from django_advisory_cron.jobs.definitions import Definition
from django_advisory_cron.jobs.option_values import calendar as calendar_option
from django_advisory_cron.ops import upcoming

UTC = timezone.utc


# The spelling ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rule", "sources"),
    [
        ("holidays:US", "skip", [Source("holidays", "US")]),
        ("holidays:de-by", "skip", [Source("holidays", "DE-BY")]),
        ("business:FR", "skip", [Source("business", "FR")]),
        ("market:nyse", "skip", [Source("market", "NYSE")]),
        ("weekends", "skip", [Source("weekends")]),
        ("dates:plant", "skip", [Source("dates", "plant")]),
        ("first:business:FR", "first", [Source("business", "FR")]),
        ("last:market:NYSE", "last", [Source("market", "NYSE")]),
        ("keep:holidays:US", "keep", [Source("holidays", "US")]),
        (
            " business:DE-BY + dates:plant ",
            "skip",
            [Source("business", "DE-BY"), Source("dates", "plant")],
        ),
        ("weekends+holidays:GB", "skip", [Source("weekends"), Source("holidays", "GB")]),
    ],
)
def test_a_calendar_is_read_as_its_rule_and_sources(
    text: str, rule: str, sources: list[Source]
) -> None:
    calendar = parse(text)
    assert calendar.rule == rule
    assert list(calendar.sources) == sources
    assert parse(calendar.text) == calendar  # the normal spelling reads the same


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("holidays:ZZ", "unknown country 'ZZ'"),
        ("holidays:DE-XX", "unknown subdivision 'XX' of DE"),
        ("market:NOPE", "unknown market 'NOPE'"),
        ("sometimes:US", "unknown rule or kind 'sometimes'"),
        ("first:nonsense:US", "unknown kind 'nonsense'"),
        ("holidays", "'holidays' needs a code"),
        ("weekends:FR", "'weekends' takes no code"),
        ("dates:two words", "a dates name is letters"),
        ("business:FR+business:fr", "names a source twice"),
        ("", "the calendar is empty"),
        ("x" * 201, "longer than 200"),
    ],
)
def test_a_bad_calendar_is_refused_in_one_line_saying_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)) as refused:
        parse(text)
    assert "\n" not in str(refused.value)


def test_the_option_normalises_and_leaves_no_calendar_empty() -> None:
    assert calendar_option("") is None
    assert calendar_option(None) is None
    assert calendar_option("skip:business:fr") == "business:FR"
    assert calendar_option("first:business:de-by") == "first:business:DE-BY"


def test_without_the_package_a_named_country_says_to_install_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(calendars, "package_missing", lambda: True)
    with pytest.raises(calendars.MissingPackage, match=r"django-advisory-cron\[calendars\]"):
        parse("business:FR")
    assert parse("business:FR", known=False).text == "business:FR"  # its grammar still checked
    assert parse("weekends+dates:plant").text == "weekends+dates:plant"  # no package needed


# The days skipped -----------------------------------------------------------------------------


def test_a_holiday_is_skipped_and_named_in_english_with_its_calendar() -> None:
    calendar = parse("holidays:DE-BY")
    assert calendar.skip_reason(date(2026, 12, 25)) == "Christmas Day (holidays:DE-BY)"
    # Epiphany is a holiday in Bavaria, not in Berlin.
    assert calendar.skip_reason(date(2027, 1, 6)) == "Epiphany (holidays:DE-BY)"
    assert parse("holidays:DE-BE").skip_reason(date(2027, 1, 6)) is None
    assert calendar.skip_reason(date(2026, 12, 22)) is None
    assert calendar.skip_reason(date(2026, 12, 26)) is not None  # a Saturday, and a holiday
    assert parse("holidays:US").skip_reason(date(2026, 12, 26)) is None  # holidays: no weekend


def test_the_answer_is_the_package_s_own() -> None:
    france = holidays.country_holidays("FR", years=2027)
    calendar = parse("holidays:FR")
    for day in calendars.days(date(2027, 1, 1), date(2027, 12, 31)):
        assert (calendar.skip_reason(day) is None) == (day not in france), day


def test_business_days_skip_the_weekend_and_the_holidays() -> None:
    calendar = parse("business:FR")
    assert calendar.skip_reason(date(2027, 5, 1)) == "Saturday (business:FR)"
    assert calendar.skip_reason(date(2026, 5, 1)) == "Labor Day (business:FR)"  # a Friday
    assert calendar.skip_reason(date(2026, 5, 4)) is None  # a Monday
    assert parse("weekends").skip_reason(date(2026, 12, 6)) == "Sunday (weekends)"


def test_a_market_is_closed_on_its_holidays_and_weekends() -> None:
    calendar = parse("market:NYSE")
    assert calendar.skip_reason(date(2026, 11, 26)) == "Thanksgiving Day (market:NYSE)"
    assert calendar.skip_reason(date(2026, 11, 28)) == "Saturday (market:NYSE)"
    assert calendar.skip_reason(date(2026, 11, 27)) is None  # the day after: open


def test_operator_dates_are_days_of_their_source() -> None:
    calendar = parse("business:FR+dates:plant")
    added = {
        ("dates:plant", date(2026, 12, 23)): "plant shutdown",
        ("business:FR", date(2026, 12, 24)): "",
        ("business:DE", date(2026, 12, 22)): "another calendar's",
    }
    assert calendar.skip_reason(date(2026, 12, 23), added) == "plant shutdown (dates:plant)"
    assert calendar.skip_reason(date(2026, 12, 24), added) == ("added by an operator (business:FR)")
    assert calendar.skip_reason(date(2026, 12, 22), added) is None


def test_keep_runs_only_on_the_calendar_s_days() -> None:
    calendar = parse("keep:holidays:US")
    assert calendar.skip_reason(date(2026, 7, 3)) is None  # Independence Day, observed
    assert calendar.skip_reason(date(2026, 7, 6)) == "not a day of holidays:US"


# First and last business day -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "month", "expected"),
    [
        # August 2026 starts on a Saturday: the first business day is Monday the 3rd.
        ("first:business:FR", (2026, 8), date(2026, 8, 3)),
        # January 2027: the 1st is New Year's Day (a Friday); the 2nd and 3rd a weekend.
        ("first:business:FR", (2027, 1), date(2027, 1, 4)),
        # May 2026 in France: the 1st is Labour Day (a Friday).
        ("first:business:FR", (2026, 5), date(2026, 5, 4)),
        # January 2026 in Bavaria: the 1st a holiday (Thursday), the 2nd a Friday.
        ("first:business:DE-BY", (2026, 1), date(2026, 1, 2)),
        # October 2026 ends on a Saturday.
        ("last:business:FR", (2026, 10), date(2026, 10, 30)),
        # December 2026: the 31st is a Thursday, no holiday in France.
        ("last:business:FR", (2026, 12), date(2026, 12, 31)),
        # May 2027 in the US: the 31st is Memorial Day (a Monday), the 29th and 30th a weekend.
        ("last:holidays:US", (2027, 5), date(2027, 5, 28)),
        # The NYSE in April 2026: the 3rd is Good Friday.
        ("first:market:NYSE", (2026, 4), date(2026, 4, 1)),
    ],
)
def test_the_first_and_last_business_day_of_a_month(
    text: str, month: tuple[int, int], expected: date
) -> None:
    calendar = parse(text)
    assert calendar.business_day_of_month(*month) == expected
    first, last = calendars.month_span(expected)
    ran = [day for day in calendars.days(first, last) if calendar.skip_reason(day) is None]
    assert ran == [expected]


def test_a_day_that_is_not_the_first_business_day_says_which_is() -> None:
    calendar = parse("first:business:FR")
    assert calendar.skip_reason(date(2026, 8, 4)) == (
        "not the first business day of the month (2026-08-03)"
    )
    assert calendar.skip_reason(date(2026, 8, 1)) == "Saturday (weekend)"


def test_an_operator_date_moves_the_first_business_day() -> None:
    calendar = parse("first:business:FR+dates:closing")
    added = {("dates:closing", date(2026, 8, 3)): "inventory"}
    assert calendar.business_day_of_month(2026, 8, added) == date(2026, 8, 4)
    assert calendar.skip_reason(date(2026, 8, 3), added) == "inventory (dates:closing)"
    assert calendar.skip_reason(date(2026, 8, 4), added) is None


def test_a_month_with_no_business_day_runs_nothing() -> None:
    calendar = parse("first:dates:x")
    added = {("dates:x", day): "off" for day in calendars.days(date(2026, 2, 1), date(2026, 2, 28))}
    assert calendar.business_day_of_month(2026, 2, added) is None
    assert calendar.skip_reason(date(2026, 2, 10), added) == "off (dates:x)"


# A tick's day is its date in the job's zone -------------------------------------------------


def test_a_tick_s_day_is_its_date_in_the_job_s_zone() -> None:
    import zoneinfo

    tick = datetime(2026, 12, 24, 23, 30, tzinfo=UTC)  # already the 25th in Berlin
    assert calendars.day_of(tick, zoneinfo.ZoneInfo("Europe/Berlin")) == date(2026, 12, 25)
    assert calendars.day_of(tick, zoneinfo.ZoneInfo("America/New_York")) == date(2026, 12, 24)


# Catch-up and the next ticks ------------------------------------------------------------------


class _Job:
    name = "report"
    catch_up: Any = "latest"
    max_lateness = None
    jitter = None
    edited = None
    calendar = "business:FR"
    timezone = "Europe/Paris"

    def __init__(self, catch_up: str = "latest") -> None:
        self.catch_up = catch_up
        self.schedule = Schedule("0 9 * * *", zone="Europe/Paris")


def _reasons(ticks: list[datetime]) -> dict[datetime, str | None]:
    calendar = parse("business:FR")
    zone = __import__("zoneinfo").ZoneInfo("Europe/Paris")
    return {tick: calendar.skip_reason(calendars.day_of(tick, zone)) for tick in ticks}


def test_catch_up_latest_runs_the_latest_day_the_calendar_keeps() -> None:
    # Down from Thursday 2026-04-30 08:00 to Monday 2026-05-04 08:00 (Paris): Thursday's and
    # Friday's ticks missed; Friday is Labour Day, then a weekend.
    first = datetime(2026, 4, 30, 7, tzinfo=UTC)
    now = datetime(2026, 5, 4, 6, tzinfo=UTC)
    plan = catchup.plan(_Job(), first, now, on_time=False, calendar=_reasons)
    assert plan.run == [first]
    assert sorted(plan.off_calendar) == [datetime(2026, 5, day, 7, tzinfo=UTC) for day in (1, 2, 3)]
    assert "skips 3 its calendar skips" in plan.describe()
    every = catchup.plan(_Job("all"), first, now, on_time=False, calendar=_reasons)
    assert every.run == [first]


def test_catch_up_runs_no_skipped_day_even_when_every_missed_day_is_skipped() -> None:
    first = datetime(2026, 5, 1, 7, tzinfo=UTC)  # Labour Day, then the weekend
    now = datetime(2026, 5, 4, 6, tzinfo=UTC)
    plan = catchup.plan(_Job("all"), first, now, on_time=False, calendar=_reasons)
    assert plan.run == []


def test_the_next_ticks_name_the_holiday_that_skips_them() -> None:
    schedule = Schedule("0 9 * * *", zone="Europe/Paris")
    ticks = upcoming.next_ticks(schedule, datetime(2026, 12, 23, tzinfo=UTC), 4, calendar=_reasons)
    assert [tick.note for tick in ticks] == [
        "",
        "",
        "skipped: Christmas Day (business:FR)",
        "skipped: Saturday (business:FR)",
    ]
    assert ticks[2].as_dict()["skipped"] == "Christmas Day (business:FR)"


# Refused where typed ---------------------------------------------------------------------------


@pytest.mark.usefixtures("fresh_registry")
def test_the_decorator_refuses_a_bad_calendar_naming_the_job() -> None:
    with pytest.raises(ValueError, match=r"^@locked_task 'bad': calendar 'holidays:ZZ': unknown"):
        locked_task(name="bad", schedule="0 9 * * *", calendar="holidays:ZZ")(print)
    job = locked_task(name="good", schedule="0 9 * * *", calendar="last:business:fr")(print)
    assert job.calendar == "last:business:FR"


def test_a_definition_refuses_a_bad_calendar_in_one_line() -> None:
    definition = Definition(name="d", command="check", cron="0 9 * * *", calendar="market:NOPE")
    (problem,) = definition.problems()
    assert "unknown market 'NOPE'" in problem
    ok = Definition(name="d", command="check", cron="0 9 * * *", calendar="business:US")
    assert ok.problems() == []


# What the rules accept builds ------------------------------------------------------------------

COUNTRIES = sorted(holidays.list_supported_countries())
MARKETS = sorted(holidays.list_supported_financial())


@st.composite
def spelled(draw: st.DrawFn) -> str:
    """Calendars spelled as people might: valid pieces, odd cases and spaces, and junk."""
    piece = st.one_of(
        st.sampled_from(COUNTRIES).map(lambda c: f"holidays:{c}"),
        st.sampled_from(COUNTRIES).map(lambda c: f"business:{c.lower()}"),
        st.sampled_from(MARKETS).map(lambda m: f"market:{m}"),
        st.just("weekends"),
        st.from_regex(r"dates:[a-z0-9_.-]{1,12}", fullmatch=True),
        st.text(max_size=12),
    )
    sources = draw(st.lists(piece, min_size=1, max_size=3))
    rule = draw(st.sampled_from(["", "skip:", "keep:", "first:", "last:", "lastly:"]))
    return rule + "+".join(sources)


@settings(max_examples=150, deadline=None)
@given(text=spelled(), day=st.dates(date(2000, 1, 1), date(2040, 12, 31)))
def test_whatever_the_rules_accept_builds_and_answers(text: str, day: date) -> None:
    if text == "":
        assert calendar_option(text) is None  # no calendar
        return
    problem = calendars.problem(text)
    if problem is not None:
        assert "\n" not in problem
        with pytest.raises(ValueError, match=re.escape(problem)):
            calendar_option(text)
        return
    built = calendar_option(text)
    assert built is not None
    calendar = parse(built)
    assert isinstance(calendar, Calendar)
    assert parse(calendar.text) == calendar
    why = calendar.skip_reason(day)
    assert why is None or (why and "\n" not in why)
    if calendar.rule in ("first", "last"):
        kept = calendar.business_day_of_month(day.year, day.month)
        assert (why is None) == (kept == day)
    definition = Definition(name="p", command="check", cron="0 9 * * *", calendar=text)
    assert definition.problems() == []


@pytest.mark.usefixtures("fresh_registry")
@settings(max_examples=40, deadline=None)
@given(text=spelled())
def test_the_decorator_accepts_exactly_what_the_option_accepts(text: str) -> None:
    accepted = text == "" or calendars.problem(text) is None
    try:
        job = locked_task(name="prop", schedule="0 9 * * *", calendar=text)(print)
    except ValueError:
        assert not accepted
    else:
        assert accepted
        assert job.calendar == calendar_option(text)
    finally:
        from django_advisory_cron.jobs.job import registry

        if "prop" in registry:
            registry.unregister("prop")


# The tick a status expects, and the next one -------------------------------------------------


class _Named:
    name = "kept"
    timezone = "Europe/Paris"

    def __init__(self, calendar: str) -> None:
        self.calendar = calendar


@pytest.fixture
def no_operator_dates(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_advisory_cron.jobs import calendars as on_calendar

    monkeypatch.setattr(on_calendar, "operator_dates", lambda *args, **kwargs: {})


@pytest.mark.usefixtures("no_operator_dates")
def test_a_skipped_day_is_stepped_over_whole_back_and_ahead() -> None:
    from django_advisory_cron.core.schedule import Every
    from django_advisory_cron.jobs.calendars import kept_tick

    every_second = Every(timedelta(seconds=1))
    sunday_noon = datetime(2026, 12, 6, 11, tzinfo=UTC)  # 12:00 in Paris
    job = _Named("weekends")
    assert kept_tick(job, every_second, sunday_noon, ahead=False) == datetime(
        2026, 12, 4, 22, 59, 59, tzinfo=UTC
    )  # Friday 23:59:59 in Paris
    assert kept_tick(job, every_second, sunday_noon, ahead=True) == datetime(
        2026, 12, 6, 23, tzinfo=UTC
    )  # Monday 00:00 in Paris


@pytest.mark.usefixtures("no_operator_dates")
def test_the_first_business_day_is_the_tick_expected_and_the_next() -> None:
    from django_advisory_cron.jobs.calendars import kept_tick

    daily = Schedule("0 9 * * *", zone="Europe/Paris")
    job = _Named("first:business:FR")
    middle = datetime(2026, 8, 15, 12, tzinfo=UTC)
    assert kept_tick(job, daily, middle, ahead=False) == datetime(2026, 8, 3, 7, tzinfo=UTC)
    assert kept_tick(job, daily, middle, ahead=True) == datetime(2026, 9, 1, 7, tzinfo=UTC)
    assert kept_tick(_Named(""), daily, middle, ahead=True) == datetime(2026, 8, 16, 7, tzinfo=UTC)
    never = _Named("keep:dates:never")  # no day: nothing within the days looked at
    assert kept_tick(never, daily, middle, ahead=True) is None


@pytest.mark.usefixtures("fresh_registry")
def test_without_the_package_a_code_job_s_calendar_is_system_check_e032(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django_advisory_cron.checks.configuration import check_jobs

    monkeypatch.setattr(calendars, "package_missing", lambda: True)
    locked_task(name="needs_holidays", every=60, calendar="business:FR")(print)  # no raise
    locked_task(name="needs_nothing", every=60, calendar="weekends")(print)
    found = [message for message in check_jobs() if message.id == "django_advisory_cron.E032"]
    assert [message.msg for message in found] == [
        "Job 'needs_holidays': the calendar business:FR needs the holidays package: "
        "pip install 'django-advisory-cron[calendars]'."
    ]
    assert "django-advisory-cron[calendars]" in str(found[0].hint)


@pytest.mark.usefixtures("fresh_registry")
def test_a_code_job_s_bad_calendar_is_system_check_e031() -> None:
    from django_advisory_cron.checks.configuration import check_jobs
    from django_advisory_cron.jobs import job as jobs

    jobs.registry.register(
        jobs.Job(func=print, name="by_hand", every=timedelta(seconds=60), calendar="holidays:ZZ")
    )
    (message,) = check_jobs()
    assert message.id == "django_advisory_cron.E031"
    assert "unknown country 'ZZ'" in message.msg
