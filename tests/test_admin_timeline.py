"""The Timeline page through Django's test client: who may see it and where it is linked, what
it draws (runs, skips, catch-ups, manual runs, retries, ticks to come with pauses, jitter and
clock changes, now), its zoom, move and filter links, in as few statements as the history's
length does not change, all without a script. (In Chromium: test_admin_timeline_browser.py.)"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from django_advisory_cron import locked_task
from django_advisory_cron.admin import timeline_svg
from django_advisory_cron.core.moments import UTC
from django_advisory_cron.db.execute import database_now
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.models import CalendarDate, JobRun, RunStatus
from django_advisory_cron.ops import control, timeline
from tests.admin_users import logged_in
from tests.test_admin import app_queries

TIMELINE_URL = reverse("admin:django_advisory_cron_timeline_changelist")
RUNS_URL = reverse("admin:django_advisory_cron_jobrun_changelist")


def run(job: str, started: datetime, seconds: float | None, status: str, **fields: Any) -> JobRun:
    finished = None if seconds is None else started + timedelta(seconds=seconds)
    values = {"tick": started, "host": "web-1", "pid": 1, **fields}
    return JobRun.objects.create(
        job=job, started=started, finished=finished, status=status, **values
    )


def lane_of(page: str, job: str) -> str:
    """The SVG row of ``job``."""
    match = re.search(
        rf'<svg class="timeline-lane"[^>]*data-job="{re.escape(job)}">.*?</svg>', page
    )
    assert match, f"no row for {job}"
    return match.group(0)


@pytest.fixture
def jobs(fresh_registry: None, db_url: str) -> datetime:
    """Four jobs and their history around the database's now, which is returned."""
    for name, options in (
        ("tl.hourly", {"schedule": "0 * * * *"}),
        ("tl.paused", {"schedule": "30 * * * *"}),
        ("tl.jittered", {"schedule": "15 * * * *", "jitter": 600}),
        ("tl.called", {}),
        ("tl.often", {"every": 10}),
    ):
        locked_task(name=name, **options)(lambda: None)
    now = database_now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    run("tl.hourly", hour - timedelta(hours=1), 40, RunStatus.SUCCEEDED)
    run("tl.hourly", hour - timedelta(hours=2), 12, RunStatus.FAILED, attempts=3)
    run("tl.hourly", hour - timedelta(hours=2), 0, RunStatus.SKIPPED_LOCKED)
    run(
        "tl.hourly",
        hour - timedelta(hours=3, minutes=-20),
        5,
        RunStatus.SUCCEEDED,
        tick=None,
        manual=True,
    )
    # A tick run late, after the next one had passed: caught up.
    run(
        "tl.hourly",
        hour - timedelta(hours=4, minutes=-10),
        3,
        RunStatus.SUCCEEDED,
        tick=hour - timedelta(hours=6),
    )
    # Long before the window: not drawn, whatever else the history holds.
    run("tl.hourly", hour - timedelta(days=3), 3, RunStatus.INTERRUPTED)
    # Started before the window and still going at its start: drawn from the window's edge.
    run("tl.called", now - timedelta(days=2), None, RunStatus.RUNNING, tick=None)
    control.pause("tl.paused")
    return now


def test_linked_from_the_app_index_for_those_who_see_the_jobs_page(
    db_url: str, django_user_model: Any
) -> None:
    viewer = logged_in(django_user_model, "viewer", ["view_registeredjob"])
    app_index = viewer.get(reverse("admin:app_list", args=["django_advisory_cron"]))
    assert f'href="{TIMELINE_URL}"' in app_index.content.decode()
    assert ">Timeline<" in app_index.content.decode()
    assert f'href="{TIMELINE_URL}"' in viewer.get(reverse("admin:index")).content.decode()
    assert viewer.get(TIMELINE_URL).status_code == 200

    history_only = logged_in(django_user_model, "history", ["view_jobrun"])
    assert f'href="{TIMELINE_URL}"' not in history_only.get(reverse("admin:index")).content.decode()
    assert history_only.get(TIMELINE_URL).status_code == 403

    anonymous = Client().get(TIMELINE_URL)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    not_staff = django_user_model.objects.create_user("nobody", password="pw")
    client = Client()
    client.force_login(not_staff)
    assert "/login/" in client.get(TIMELINE_URL)["Location"]


def test_draws_runs_skips_and_coming_ticks_without_a_script(
    jobs: datetime, django_user_model: Any
) -> None:
    viewer = logged_in(django_user_model, "viewer", ["view_registeredjob", "view_jobrun"])
    page = viewer.get(TIMELINE_URL).content.decode()
    main = page.split('id="content-main"')[1]
    assert "<script" not in main  # drawn on the server: nothing to run

    hourly = lane_of(page, "tl.hourly")
    assert hourly.count('<rect class="run') == 4
    assert "tl.hourly: failed" in hourly and "3 attempts" in hourly
    assert re.search(r'<text class="flag"[^>]*>!R</text>', hourly)
    assert re.search(r'<text class="flag"[^>]*>M</text>', hourly)
    assert re.search(r'<text class="flag"[^>]*>C</text>', hourly)
    assert "caught up after its next tick had passed" in hourly
    assert hourly.count('<circle class="skip s-skipped_locked"') == 1
    assert str(RunStatus.INTERRUPTED.label) not in hourly  # three days ago
    drawn = JobRun.objects.filter(job="tl.hourly", started__gt=jobs - timedelta(hours=18))
    drawn = drawn.exclude(status=RunStatus.SKIPPED_LOCKED)
    assert drawn.count() == 4
    for run_id in drawn.values_list("id", flat=True):
        assert f'<a href="{RUNS_URL}{run_id}/change/">' in hourly
    # A quarter of a day ahead: six hourly ticks to come, and the now line.
    assert hourly.count('<line class="tick"') == 6
    assert hourly.count('<line class="now"') == 1

    paused = lane_of(page, "tl.paused")
    assert paused.count('<line class="tick skipped"') == 6
    assert "skipped: paused" in paused
    jittered = lane_of(page, "tl.jittered")
    assert jittered.count('<rect class="jitter"') == 6 and "(jitter)" in jittered

    # Every 10 s: 2,160 ticks in six hours, 300 drawn, and the row says so.
    assert lane_of(page, "tl.often").count('<line class="tick"') == 300
    often = page.split('<tr class="timeline-row" data-job="tl.often">')[1].split("</tr>")[0]
    assert "more than drawn: zoom in" in often
    assert "more than drawn" not in page.split('data-job="tl.hourly">')[1].split("</tr>")[0]

    called = lane_of(page, "tl.called")
    assert 'class="run s-running" x="0.000%"' in called
    assert "no schedule: runs when called" in page
    assert f'href="{RUNS_URL}?job=tl.hourly"' in page
    assert "PAUSED" in page


def test_runs_link_to_their_page_only_for_those_who_see_the_history(
    jobs: datetime, django_user_model: Any
) -> None:
    viewer = logged_in(django_user_model, "viewer", ["view_registeredjob"])
    page = viewer.get(TIMELINE_URL).content.decode()
    assert '<rect class="run' in page
    assert f'href="{RUNS_URL}' not in page


def test_two_statements_however_many_jobs_and_runs(jobs: datetime, django_user_model: Any) -> None:
    viewer = logged_in(django_user_model, "viewer", ["view_registeredjob", "view_jobrun"])
    with CaptureQueriesContext(connection) as captured:
        assert viewer.get(TIMELINE_URL).status_code == 200
    # The database's schedules, then the window, the pauses and the runs.
    assert len(app_queries(captured)) == 2
    for number in range(30):
        locked_task(name=f"tl.more{number}", schedule="*/5 * * * *")(lambda: None)
        run(f"tl.more{number}", jobs - timedelta(minutes=30), 1, RunStatus.SUCCEEDED)
    with CaptureQueriesContext(connection) as captured:
        assert viewer.get(TIMELINE_URL, {"status": "failed"}).status_code == 200
    assert len(app_queries(captured)) == 2


def test_zoom_move_and_filters(jobs: datetime, django_user_model: Any) -> None:
    viewer = logged_in(django_user_model, "viewer", ["view_registeredjob", "view_jobrun"])
    hour = viewer.get(TIMELINE_URL, {"span": "1h"}).content.decode()
    assert '<strong aria-current="true">1 hour</strong>' in hour
    # A quarter of an hour ahead: at most one hourly tick; the runs of hours ago are out.
    assert lane_of(hour, "tl.hourly").count('<rect class="run') <= 1
    assert "span=1h" in hour.split('rel="prev"')[0].rsplit("<a", 1)[1]

    week = viewer.get(TIMELINE_URL, {"span": "7d"}).content.decode()
    assert str(RunStatus.INTERRUPTED.label) in lane_of(week, "tl.hourly")

    failed = viewer.get(TIMELINE_URL, {"status": "failed"}).content.decode()
    assert 'data-job="tl.hourly"' in failed and 'data-job="tl.paused"' not in failed
    paused = viewer.get(TIMELINE_URL, {"status": "paused"}).content.decode()
    assert 'data-job="tl.paused"' in paused and 'data-job="tl.hourly"' not in paused
    named = viewer.get(TIMELINE_URL, {"q": "JITTER"}).content.decode()
    assert 'data-job="tl.jittered"' in named and 'data-job="tl.hourly"' not in named
    assert "1 job." in named

    # Two days back: the running job's run, nothing to come.
    earlier = (jobs - timedelta(days=2, hours=-1)).isoformat()
    past = viewer.get(TIMELINE_URL, {"end": earlier}).content.decode()
    past = past.split('id="timeline-legend"')[0]
    assert '<line class="tick' not in past and '<line class="now"' not in past
    assert 'class="run s-running"' in lane_of(past, "tl.called")
    assert ">now</a>" in past  # back to now

    for query, said in (
        ({"span": "2w"}, "there is no span &#x27;2w&#x27;"),
        ({"end": "yesterday"}, "&#x27;yesterday&#x27; is not a date and time"),
        ({"status": "odd"}, "there is no status filter &#x27;odd&#x27;"),
    ):
        response = viewer.get(TIMELINE_URL, query)
        assert response.status_code == 200
        assert said in response.content.decode()


def test_clock_changes_are_marked_on_the_ticks_to_come(
    fresh_registry: None, db_url: str, django_user_model: Any
) -> None:
    locked_task(name="tl.paris", schedule="0 * * * *", timezone="Europe/Paris")(lambda: None)
    viewer = logged_in(django_user_model, "viewer", ["view_registeredjob"])
    now = database_now()
    # Summer time begins in Europe on the last Sunday of March, at 01:00 UTC.
    march = datetime(now.year + 1, 3, 31, 12, tzinfo=now.tzinfo)
    change = march - timedelta(days=(march.weekday() + 1) % 7, hours=11)
    page = viewer.get(
        TIMELINE_URL, {"end": (change + timedelta(hours=6)).isoformat()}
    ).content.decode()
    paris = lane_of(page, "tl.paris")
    assert "clocks change: UTC+01:00 -&gt; UTC+02:00" in paris
    assert paris.count('<text class="flag dst"') == 1
    assert paris.count('<line class="tick"') == 24


@pytest.fixture
def viewer(db_url: str, django_user_model: Any) -> Client:
    return logged_in(django_user_model, "viewer", ["view_registeredjob", "view_jobrun"])


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    span=st.one_of(st.sampled_from(list(timeline.SPANS)), st.text(max_size=8)),
    end=st.one_of(
        st.datetimes(timezones=st.sampled_from([UTC, ZoneInfo("Europe/Paris")])).map(
            datetime.isoformat
        ),
        st.text(max_size=30),
    ),
    status=st.one_of(st.sampled_from(list(timeline.STATUS_FILTERS)), st.text(max_size=8)),
    search=st.text(max_size=20),
)
@example(span="7d", end="9998-12-31T23:59:59+00:00", status="", search="")
@example(span="7d", end="0001-01-01T00:00:00", status="", search="")
@example(span="\0", end="\0", status="\0", search="\0")
def test_any_parameters_show_the_page_or_say_why_in_one_line(
    viewer: Client, span: str, end: str, status: str, search: str
) -> None:
    query = {"span": span, "end": end, "status": status, "q": search}
    response = viewer.get(TIMELINE_URL, query)
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="timeline"' in page and "Traceback" not in page
    warnings = re.findall(r'<li class="warning">(.*?)</li>', page, re.DOTALL)
    assert all(line.startswith("Timeline: ") and "\n" not in line for line in warnings)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    start=st.datetimes(
        min_value=datetime(1971, 1, 1), max_value=datetime(9990, 1, 1), timezones=st.just(UTC)
    ),
    span=st.sampled_from(list(timeline.SPANS.values())),
    zone=st.sampled_from(
        [
            UTC,
            ZoneInfo("Europe/Paris"),
            ZoneInfo("America/Santiago"),
            ZoneInfo("Australia/Lord_Howe"),
        ]
    ),
)
def test_the_axis_marks_stay_in_order_within_the_window(
    start: datetime, span: timedelta, zone: ZoneInfo
) -> None:
    window = timeline.Window(start.timestamp(), (start + span).timestamp(), start.timestamp())
    marks = timeline_svg.grid(window, zone)
    places = [place for place, _at in marks]
    assert places == sorted(places) and all(0 <= place <= 100 for place in places)
    assert len(marks) >= span / timeline_svg.step_of(span) - 2
    assert all(window.start < at.timestamp() < window.end for _place, at in marks)


def test_ticks_outside_the_schedules_start_and_end_are_marked_skipped() -> None:
    now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    ends = now + timedelta(hours=3, minutes=30)
    job = Job(lambda: None, "tl.until", cron="0 * * * *", ends=ends)
    window = timeline.Window(now.timestamp() - 3600, now.timestamp() + 6 * 3600, now.timestamp())
    lane = timeline.Lane(job)
    timeline.add_ticks(window, [lane])
    assert [tick.skipped for tick in lane.ticks] == [""] * 3 + [
        "outside the schedule's start and end"
    ] * 3


@pytest.mark.django_db
def test_ticks_on_a_calendar_s_days_off_are_marked_skipped_with_the_reason() -> None:
    """A job whose calendar is off on a day (here a date an operator added): its ticks that
    day are drawn as skips naming the reason, the others as ticks to come."""
    CalendarDate.objects.create(
        calendar="dates:tl-off", day=date(2026, 12, 7), reason="stocktaking"
    )
    now = datetime(2026, 12, 6, 21, 30, tzinfo=UTC)
    job = Job(
        lambda: None, "tl.calendar", cron="0 * * * *", timezone="UTC", calendar="dates:tl-off"
    )
    window = timeline.Window(now.timestamp() - 3600, now.timestamp() + 6 * 3600, now.timestamp())
    lane = timeline.Lane(job)
    timeline.add_ticks(window, [lane])
    skipped = [tick.skipped for tick in lane.ticks]
    assert len(skipped) == 6 and skipped[:2] == ["", ""], skipped
    assert all("stocktaking" in reason for reason in skipped[2:]), skipped
