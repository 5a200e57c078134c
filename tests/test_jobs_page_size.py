"""The Jobs page with hundreds of registered jobs: a page of them at a time (the jobs with a
problem first), a search over their names, summary counts over all of them, and as many
statements whatever their number. And the run list, when it counts only its first 1,000
rows, never claims that there are exactly 1,000."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_advisory_cron import locked_task
from django_advisory_cron.admin.jobs import RegisteredJobAdmin
from django_advisory_cron.admin.runs import BoundedCountPaginator
from django_advisory_cron.jobs.job import registry
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import control
from tests.admin_users import VIEWING, logged_in

JOBS_URL = reverse("admin:django_advisory_cron_registeredjob_changelist")
RUNS_URL = reverse("admin:django_advisory_cron_jobrun_changelist")
PER_PAGE = RegisteredJobAdmin.list_per_page
JOBS = [f"pages.job{number:03d}" for number in range(210)]
FAILING, PAUSED = JOBS[-1], JOBS[-2]

#: Three runs of each job, the newest failed for ``FAILING`` only.
FILL = """
INSERT INTO django_advisory_cron_jobrun (job, tick, host, pid, started, finished, status, error)
SELECT job, NULL, 'web', 1, at, at + interval '2 seconds',
       CASE WHEN job = %(failing)s AND n = 1 THEN 'failed' ELSE 'succeeded' END, ''
FROM unnest(%(jobs)s::text[]) AS job,
     LATERAL (SELECT n, %(now)s::timestamptz - make_interval(mins => n) AS at
              FROM generate_series(1, 3) AS n) AS runs
"""


@pytest.fixture
def jobs(fresh_registry: None) -> list[str]:
    for name in JOBS:
        locked_task(name=name)(lambda: None)
    return JOBS


@pytest.fixture
def history(db_url: str, jobs: list[str]) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(FILL, {"jobs": jobs, "failing": FAILING, "now": timezone.now()})
    control.pause(PAUSED, by="ops", reason="maintenance")
    return jobs


@pytest.fixture
def viewer(db_url: str, django_user_model: Any) -> Client:
    return logged_in(django_user_model, "pages", VIEWING)


def job_rows(page: str) -> list[str]:
    return re.findall(r'<tr class="job-row" data-job="([^"]+)"', page)


def get(client: Client, query: dict[str, Any]) -> tuple[str, list[str]]:
    """The Jobs page, and the statements it sent besides the session and user lookups."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(JOBS_URL, query)
    assert response.status_code == 200
    auth = ('FROM "django_session"', 'FROM "auth_')
    sent = [q["sql"] for q in captured.captured_queries if not any(a in q["sql"] for a in auth)]
    return response.content.decode(), sent


def test_jobs_page_shows_a_page_of_jobs_problems_first(viewer: Client, history: list[str]) -> None:
    everyone = [job.name for job in registry.all()]
    pages = -(-len(everyone) // PER_PAGE)
    first, _sent = get(viewer, {})
    rows = job_rows(first)
    assert len(rows) == PER_PAGE < len(everyone)
    assert rows[0] == FAILING  # last by name, first by health
    assert 'class="paginator"' in first and f'href="?p={pages}"' in first
    seen = list(rows)
    for number in range(2, pages + 1):
        page, _sent = get(viewer, {"p": number})
        seen += job_rows(page)
    assert sorted(seen) == sorted(everyone) and len(seen) == len(everyone)


def test_summary_counts_every_job_on_every_page(viewer: Client, history: list[str]) -> None:
    total = len(registry.all())
    for query in ({}, {"p": 2}, {"q": "job007"}):
        page, _sent = get(viewer, query)
        summary = page.split('id="jobs-summary"')[1].split("</p>")[0]
        assert "1 job needs attention." in summary, query
        assert "1 job is paused." in summary, query
        if "q" in query:
            assert f">{total} total</a>)" in page.split('id="toolbar"')[1], query
        else:
            assert f"{total} jobs" in page.split('class="paginator"')[1], query


def test_a_healthy_registry_is_counted_whole(viewer: Client, jobs: list[str]) -> None:
    page, _sent = get(viewer, {})
    summary = page.split('id="jobs-summary"')[1].split("</p>")[0]
    assert f"{len(registry.all())} jobs, all healthy." in summary


def test_search_finds_a_job_among_hundreds(viewer: Client, history: list[str]) -> None:
    page, _sent = get(viewer, {"q": "JOB123"})
    assert job_rows(page) == ["pages.job123"]
    assert 'id="searchbar"' in page and 'value="JOB123"' in page
    assert "1 result" in page.split('id="toolbar"')[1].split("</form>")[0]
    several, _sent = get(viewer, {"q": "pages.job1"})
    assert len(job_rows(several)) == PER_PAGE
    assert 'href="?q=pages.job1&amp;p=2"' in several.split('class="paginator"')[1]
    second, _sent = get(viewer, {"q": "pages.job1", "p": 2})
    assert set(job_rows(second)).isdisjoint(job_rows(several))
    assert all(name.startswith("pages.job1") for name in job_rows(second))
    nothing, _sent = get(viewer, {"q": "no such job"})
    assert job_rows(nothing) == [] and "0 results" in nothing


def test_statements_and_charts_do_not_grow_with_the_jobs(
    viewer: Client, history: list[str]
) -> None:
    """Four statements (the database's schedules; the history with the job states and the
    live workers; held locks; the charts' runs), and charts drawn for the jobs shown only."""
    for query in ({}, {"p": 3}, {"q": "pages.job0"}):
        page, sent = get(viewer, query)
        assert len(sent) == 4, (query, sent)
        shown = set(job_rows(page))
        assert page.count('<svg class="run-chart"') == len(shown & set(JOBS)) <= PER_PAGE
        (charts,) = [statement for statement in sent if "LIMIT 50" in statement]
        assert set(re.findall(r"pages\.job\d{3}", charts)) == shown & set(JOBS), query


def test_a_page_past_the_end_shows_the_last(viewer: Client, jobs: list[str]) -> None:
    last, _sent = get(viewer, {"p": 99})
    everyone = [job.name for job in registry.all()]
    assert job_rows(last) and job_rows(last)[-1] == everyone[-1]
    assert job_rows(get(viewer, {"p": "x"})[0])[0] == everyone[0]


def test_run_list_says_more_than_its_count_limit_where_it_shows_a_count(
    viewer: Client, jobs: list[str]
) -> None:
    """Filtered or searched, the admin shows the result count beside the search box: past
    the count's limit it says "more than", never the limit as if it were the count."""
    limit = BoundedCountPaginator.limit
    now = timezone.now()
    JobRun.objects.bulk_create(
        JobRun(job=JOBS[0], host="web", pid=1, started=now, status=RunStatus.FAILED)
        for _ in range(limit + 5)
    )
    JobRun.objects.create(job=JOBS[1], host="web", pid=1, started=now, status=RunStatus.FAILED)
    for query in ({"status__exact": "failed"}, {"q": "web"}, {"job": JOBS[0]}):
        page = viewer.get(RUNS_URL, query).content.decode()
        toolbar = page.split('id="toolbar"')[1].split("</form>")[0]
        assert f"more than {limit:,} results" in toolbar, query
        assert f"{limit} results" not in page and f"{limit:,} results" not in toolbar.replace(
            f"more than {limit:,} results", ""
        ), query
        assert f"more than {limit:,} job runs" in page, query
    exact = viewer.get(RUNS_URL, {"job": JOBS[1]}).content.decode()
    assert "1 result" in exact.split('id="toolbar"')[1] and "more than" not in exact


@pytest.fixture
def operator(db_url: str, django_user_model: Any) -> Client:
    return logged_in(django_user_model, "operator", [*VIEWING, "operate_job"])


def test_pause_and_resume_bring_the_operator_back_to_the_same_page(
    operator: Client, history: list[str]
) -> None:
    """The operate form carries the page and the search it was sent from, and nothing else
    comes back from it: the redirect stays on the Jobs page."""
    page, _sent = get(operator, {"q": "pages.job1", "p": 2})
    assert 'name="back" value="q=pages.job1&amp;p=2"' in page
    name = job_rows(page)[0]
    operate = reverse("admin:django_advisory_cron_registeredjob_operate")
    back = "q=pages.job1&p=2&next=//elsewhere.example"
    paused = operator.post(operate, {"job": name, "operation": "pause", "back": back})
    assert paused.status_code == 302
    assert paused["Location"] == f"{JOBS_URL}?q=pages.job1&p=2"
    resumed = operator.post(operate, {"job": name, "operation": "resume"})
    assert resumed["Location"] == JOBS_URL
