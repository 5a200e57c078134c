"""One schedule row never stops the others (issue 33): what the definition rules accept builds a
job, and whatever a row written straight in SQL holds, it is reported as unable to run while
every other job runs, in real ``cronjob``, ``cronworker``, ``cronstatus`` and ``runlocked``
processes, the Jobs page and ``health/``, against a real PostgreSQL."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from django_advisory_cron import exitcodes
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.models import Schedule
from tests.admin_users import logged_in
from tests.jobsapp.models import Marker

from .test_admin_schedules import ADD_URL, EDITING, LIST_URL, errors, form
from .test_cronjob_import import _manage
from .test_cronjob_schedules import ok, refused
from .waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

#: Two schedule names whose lock keys are the same (the first 32 bits of their SHA-256).
SAME_KEY = ("nightly-26896", "nightly-39373")
#: What the rules say of a number of seconds out of bounds.
INTERVAL = "the interval must be a number of seconds from 1 to 31622400 (366 days), not {}"
SECONDS = "the {} must be a number of seconds from 0.000001 to 31622400 (366 days), not {}"


@pytest.fixture(autouse=True)
def schedule_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks"}))


OUT_OF_BOUNDS = [
    (["--every", "1e-9"], INTERVAL.format("1e-09")),
    (["--every", "0.5"], INTERVAL.format("0.5")),
    (["--every", "1e300"], INTERVAL.format("1e+300")),
    (["--every", "60", "--timeout", "1e300"], SECONDS.format("timeout", "1e+300")),
    (["--every", "60", "--timeout", "1e-9"], SECONDS.format("timeout", "1e-09")),
    (["--every", "60", "--max-lateness", "1e300"], SECONDS.format("max lateness", "1e+300")),
    (
        ["--every", "60", "--retries", "1", "--retry-backoff", "1e300"],
        SECONDS.format("retry back-off", "1e+300"),
    ),
]


@pytest.mark.parametrize(
    ("options", "says"), OUT_OF_BOUNDS, ids=[" ".join(o) for o, _ in OUT_OF_BOUNDS]
)
def test_add_refuses_seconds_a_job_cannot_be_built_with(
    manage: Any, options: list[str], says: str
) -> None:
    added = manage("cronjob", "add", "poison", "--command", "noop", *options)
    assert refused(added) == f"cronjob: cannot add 'poison': {says}"
    assert not Schedule.objects.exists()


def test_the_admin_form_refuses_them_on_their_fields(
    fresh_registry: None, django_user_model: Any
) -> None:
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))
    editor = logged_in(django_user_model, "editor", EDITING)
    posted = editor.post(ADD_URL, form(cron="", every="1e-9", timeout="1e300"))
    assert errors(posted) == {
        "every": [INTERVAL.format("1e-09")],
        "timeout": [SECONDS.format("timeout", "1e+300")],
    }
    assert not Schedule.objects.exists()


def test_import_refuses_a_celery_beat_entry_of_100_nanoseconds(db_url: str) -> None:
    done = _manage(
        db_url, "cronjob", "import", "--from", "celery-beat",
        settings="tests.settings_import_poison",
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (exitcodes.USAGE, ""), done.stderr
    assert done.stdout.splitlines()[0] == (
        f"CELERY_BEAT_SCHEDULE['every-100-ns'] -> every-100-ns: refused: {INTERVAL.format('1e-07')}"
        "; it would be calling job send_report(), every 1e-07s"
    )
    assert not Schedule.objects.exists()


#: Rows no rule accepts, as SQL can write them: each column at its extreme.
POISON: dict[str, dict[str, Any]] = {
    "poison": {"every": 1e-9},
    "huge": {"every": 1e300},
    "nan": {"every": float("nan")},
    "infinite": {"every": float("inf")},
    "timeout": {"timeout": 1e300},
    "lateness": {"max_lateness": float("inf")},
    "target": {"late_after": -1.0},
    "backoff": {"retries": 2147483647, "retry_backoff": 1e300},
    "forever": {"starts": "-infinity", "ends": "infinity"},
    "far": {"starts": "294276-01-01 00:00:00+00"},
    "deep": {"args": "[" * 5000 + "]" * 5000},
    "text": {"args": '"text"', "kwargs": "[]"},
    "cron": {"every": None, "cron": "* * * * * * *"},
    "zone": {"every": None, "cron": "0 * * * *", "timezone": "../../etc/passwd"},
    "catchup": {"catch_up": "sometimes"},
    "deliver": {"deliver": "celery:" + "x" * 190},
    "code_yearly": {"override": True, "command": "", "every": 1e-9},  # overrides a code job
}


def write_row(connection: Any, name: str, **columns: Any) -> None:
    """A schedule row calling ``manage.py noop`` every minute, with ``columns`` instead."""
    values = {
        "name": name, "override": False, "job": "", "command": "noop", "args": "[]",
        "kwargs": "{}", "cron": "", "every": 60.0, "timezone": "", "enabled": True,
        "catch_up": "", "deliver": "", "description": "", "changed_by": "sql", **columns,
    }  # fmt: skip
    connection.execute(
        f"INSERT INTO django_advisory_cron_schedule ({', '.join(values)}) "
        f"VALUES ({', '.join(['%s'] * len(values))})",
        list(values.values()),
    )


def marks(label: str) -> int:
    return Marker.objects.filter(job=label).count()


@pytest.mark.slow  # a worker's real ticks, a second apart, and five commands: about 15 s
def test_a_row_no_rule_accepts_leaves_every_other_job_running(
    manage: Any, spawn: Any, raw_connect: Any, django_user_model: Any, fresh_registry: None
) -> None:
    ok(manage("cronjob", "add", "alive", "--job", "mark", "--args", '["alive"]', "--every", "1"))
    worker = spawn("cronworker")
    wait_for(lambda: marks("alive"), timeout=30)
    connection = raw_connect()
    for name, columns in POISON.items():
        write_row(connection, name, **columns)

    before = marks("alive")
    wait_for(lambda: marks("alive") >= before + 2 or worker.poll() is not None, timeout=30)
    assert worker.poll() is None, worker.communicate()[1][-2000:]

    shown = json.loads(ok(manage("cronjob", "list", "--json")))
    assert sorted(shown["cannot_run"]) == sorted(POISON)
    assert shown["cannot_run"]["poison"] == INTERVAL.format("1e-09")
    assert shown["cannot_run"]["forever"] == (
        "its start and end are outside the years 1 to 9999; give times within them"
    )
    assert "alive" in {job["job"] for job in shown["jobs"]}
    status = manage("cronstatus")
    assert status.returncode in (0, exitcodes.UNHEALTHY) and not status.stderr, status.stderr
    assert manage("runlocked", "alive").returncode == 0

    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))  # mark, here too
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    jobs_page = client.get(reverse("admin:django_advisory_cron_registeredjob_changelist"))
    assert jobs_page.status_code == 200 and b'data-job="alive"' in jobs_page.content
    assert client.get(reverse("advisory_cron:health")).status_code == 200
    ok(manage("cronjob", "edit", "deep", "--args", "[]"))  # what could be read is kept
    assert "deep" not in json.loads(ok(manage("cronjob", "list", "--json")))["cannot_run"]
    # The Schedules page shows the others, each with why it cannot run, and names those whose
    # times the driver cannot read ('infinity').
    schedules = client.get(LIST_URL)
    assert schedules.status_code == 200 and b"every 1e+300s" in schedules.content
    assert b"which this page cannot show: far, forever." in schedules.content

    assert ok(manage("cronjob", "remove", "poison")) == (
        "poison: removed (it called manage.py noop); its run history is kept.\n"
    )
    assert not Schedule.objects.filter(name="poison").exists()
    worker.terminate()
    logged = worker.communicate(timeout=30)[1]
    assert "schedule deep is not run: " in logged, logged[-2000:]


def test_two_schedules_sharing_a_lock_key_both_cannot_run(manage: Any, raw_connect: Any) -> None:
    first, second = SAME_KEY
    assert job_key(first).objid == job_key(second).objid  # the collision the test needs
    ok(manage("cronjob", "add", first, "--command", "noop", "--every", "60"))
    assert refused(manage("cronjob", "add", second, "--command", "noop", "--every", "60")) == (
        f"cronjob: cannot add {second!r}: the name {second!r} has the same lock key as job "
        f"{first!r}"
    )
    write_row(raw_connect(), second)  # as a concurrent add, or SQL, writes it

    shown = json.loads(ok(manage("cronjob", "list", "--json")))
    assert shown["cannot_run"] == {
        first: f"it has the same lock key as schedule {second!r}; rename one of them",
        second: f"it has the same lock key as schedule {first!r}; rename one of them",
    }
    assert refused(manage("runlocked", first)) == (
        f"runlocked: the schedule {first!r} cannot run: it has the same lock key as schedule "
        f"{second!r}; rename one of them; change it with 'manage.py cronjob edit {first}', or "
        "remove it"
    )


def test_the_schedules_page_shows_the_rows_it_can_read_and_names_the_others(
    raw_connect: Any, django_user_model: Any
) -> None:
    connection = raw_connect()
    write_row(connection, "nightly")
    write_row(connection, "forever", **POISON["forever"])
    write_row(connection, "far", **POISON["far"])
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))

    page = client.get(LIST_URL)

    assert page.status_code == 200
    shown = page.content.decode()
    assert 'href="/admin/django_advisory_cron/schedule/' in shown and ">nightly<" in shown
    assert (
        "2 schedules hold times outside the years 1 to 9999, which this page cannot show: far, "
        "forever. They cannot run; give them times within those years with manage.py cronjob "
        "edit NAME --starts WHEN --ends WHEN, or remove them with manage.py cronjob remove NAME."
    ) in shown
