"""``manage.py cronjob import`` of schedules as real projects write them (issue 37): each entry
becomes the schedule that fires when its source fires it, or is refused in one line that says
why. Real ``manage.py`` subprocesses, real django-q2 and django-celery-beat rows written
through their models, as in ``test_cronjob_import``."""

from __future__ import annotations

import pytest

from tests.test_cronjob_import import _has_beat, _lines, _manage, _shell
from tests.test_cronjob_import import import_db as import_db  # a fixture


def _dry_run(url: str, source: str, settings: str = "tests.settings_import") -> dict[str, str]:
    done = _manage(url, "cronjob", "import", "--from", source, "--dry-run", settings=settings)
    print(done.stdout + done.stderr)
    return _lines(done)


def test_django_q2_monthly_rows_past_the_28th_import_as_django_q2_runs_them(
    import_db: str,
) -> None:
    """django-q2 adds a month by clamping to a shorter month's last day, and keeps that day:
    a Monthly row on the 31st runs on the 28th from the first February on (12 runs a year)."""
    _shell(
        import_db,
        """
import datetime as dt
from django_q.models import Schedule
def add(name, kind, *day):
    Schedule.objects.create(name=name, func="tests.jobsapp.import_tasks.send_report",
        schedule_type=kind, next_run=dt.datetime(*day, 9, 0, tzinfo=dt.timezone.utc))
add("monthly 31", "M", 2027, 1, 31)
add("monthly 15", "M", 2027, 1, 15)
add("quarterly 31", "Q", 2027, 1, 31)
add("yearly 29 february", "Y", 2028, 2, 29)
Schedule.objects.create(name="odd mondays", func="tests.jobsapp.import_tasks.send_report",
    schedule_type="C", cron="0 0 */2 * 1")
Schedule.objects.create(name="bad cron", func="tests.jobsapp.import_tasks.send_report",
    schedule_type="C", cron="1 * * * *")
Schedule.objects.filter(name="bad cron").update(cron="61 * * * *")  # as SQL can write it
""",
    )
    said = _dry_run(import_db, "django-q2")
    assert said["django-q2 Schedule 'monthly 15'"].endswith(
        "would import, calling job send_report(), 0 9 15 * *"
    )
    assert said["django-q2 Schedule 'monthly 31'"].endswith(
        "would import, calling job send_report(), 0 9 28 * *; django-q2 runs it on "
        "2027-01-31, then on day 28 from 2027-02-28 on (a shorter month lowers its day for "
        "good): here it runs on day 28 from the start"
    )
    assert said["django-q2 Schedule 'quarterly 31'"].endswith(
        "would import, calling job send_report(), 0 9 30 1,4,7,10 *; django-q2 runs it on "
        "2027-01-31, then on day 30 from 2027-04-30 on (a shorter month lowers its day for "
        "good): here it runs on day 30 from the start"
    )
    assert said["django-q2 Schedule 'yearly 29 february'"].endswith(
        "would import, calling job send_report(), 0 9 28 2 *; django-q2 runs it on "
        "2028-02-29, then on day 28 from 2029-02-28 on (a shorter month lowers its day for "
        "good): here it runs on day 28 from the start"
    )
    assert said["django-q2 Schedule 'bad cron'"].startswith(
        "django-q2 Schedule 'bad cron' -> bad-cron: refused: bad cron expression: "
        "'61 * * * *' is not a valid cron expression: minute 61 is out of range 0-59"
    )
    # croniter matches either day field where cron, as one starts with *, matches both.
    assert said["django-q2 Schedule 'odd mondays'"].endswith(
        "would import, calling job send_report(), 0 0 1-31/2 * 1; django-q2 (croniter) reads "
        "the day fields of '0 0 */2 * 1' otherwise than cron: written '0 0 1-31/2 * 1' here, "
        "which cron runs on the same days as django-q2"
    )


def test_django_q2_rows_are_read_in_its_clusters_time_zone(import_db: str) -> None:
    """django-q2 reads its schedules in ``Q_CLUSTER["time_zone"]`` when set, not
    ``TIME_ZONE`` (UTC here)."""
    _shell(
        import_db,
        """
import datetime as dt
from django_q.models import Schedule
Schedule.objects.create(name="sessions", func="django.core.management.call_command",
    args="'clearsessions'", schedule_type="C", cron="30 3 * * *")
Schedule.objects.create(name="daily", func="tests.jobsapp.import_tasks.send_report",
    schedule_type="D", next_run=dt.datetime(2027, 1, 4, 6, 15, tzinfo=dt.timezone.utc))
""",
    )
    said = _dry_run(import_db, "django-q2", settings="tests.settings_import_q2_zone")
    assert said["django-q2 Schedule 'sessions'"].endswith(
        "would import, calling manage.py clearsessions, 30 3 * * * in Europe/Berlin"
    )
    assert said["django-q2 Schedule 'daily'"].endswith(
        "would import, calling job send_report(), 15 7 * * * in Europe/Berlin"
    )


def test_django_crontabs_three_item_form_has_a_shell_suffix_not_arguments(
    import_db: str,
) -> None:
    said = _dry_run(import_db, "crontab", settings="tests.settings_import_suffix")
    assert said["CRONJOBS[0]"] == (
        "CRONJOBS[0] -> send_report: would import, the schedule of job send_report (defined in "
        "code), 0 6 * * * in UTC (TIME_ZONE, not the host's zone); its shell suffix "
        "'>> report.log 2>&1' is dropped: to keep a job's output with each run, capture it "
        "(capture=True on the job, or 'cronjob edit NAME --capture yes')"
    )
    assert said["CRONJOBS[1]"] == (
        "CRONJOBS[1] -> purge-days-2: would import, calling job purge(days=2), 30 3 * * * in UTC "
        "(TIME_ZONE, not the host's zone); its shell suffix '>> purge.log' is dropped: to keep "
        "a job's output with each run, capture it (capture=True on the job, or 'cronjob edit "
        "NAME --capture yes')"
    )
    assert said["CRONJOBS[2]"].startswith(
        "CRONJOBS[2] -> purge: refused: '@reboot' runs when cron starts, at no time of "
        "day, so it has no ticks: run the job with 'manage.py runlocked NAME' where the host or "
        "container starts; it would be the schedule of job purge (defined in code), @reboot"
    )


@pytest.mark.skipif(not _has_beat(), reason="django-celery-beat supports Django < 6.1 only")
def test_django_celery_beat_rows_in_celerys_spellings_read_as_celery_reads_them(
    import_db: str,
) -> None:
    """django-celery-beat stores a beat entry's crontab as celery spells it (``monday``,
    ``mon-fri``); celery ANDs the two day fields, so ``0-6`` beside a day of month is that day."""
    _shell(
        import_db,
        """
from django_celery_beat.models import CrontabSchedule, PeriodicTask
def add(name, **fields):
    PeriodicTask.objects.create(name=name, task="send_report",
        crontab=CrontabSchedule.objects.create(minute="0", hour="9", **fields))
add("mondays", day_of_week="monday")
add("weekdays", day_of_week="mon-fri")
add("the first", day_of_month="1", day_of_week="0-6")
add("bad day", day_of_week="funday")
""",
    )
    said = _dry_run(import_db, "django-celery-beat")
    for name, cron in (
        ("mondays", "0 9 * * 1"),
        ("weekdays", "0 9 * * 1-5"),
        ("the first", "0 9 1 * *"),
    ):
        assert said[f"PeriodicTask {name!r}"].endswith(
            f"would import, calling job send_report(), {cron} in UTC"
        ), said[f"PeriodicTask {name!r}"]
    assert "cannot import: celery cannot read its crontab" in said["PeriodicTask 'bad day'"]


def test_a_schedule_class_of_the_projects_own_says_what_to_do(import_db: str) -> None:
    said = _dry_run(import_db, "celery-beat", settings="tests.settings_import_custom")
    assert said["CELERY_BEAT_SCHEDULE['sale-ends']"] == (
        "CELERY_BEAT_SCHEDULE['sale-ends']: cannot import: a schedule of type WhenSalesEnd has "
        "no equivalent here: it decides in its own code when it is due; add a cron expression "
        "or interval that ticks as often as it should be checked ('cronjob add'), and check "
        "the rest in the job"
    )


def test_a_crontab_of_both_days_imports_when_cron_matches_both_too(import_db: str) -> None:
    """celery runs a crontab on the days that match both day fields; cron does too when one
    starts with ``*``, so a day of the month celery expands from ``*/2`` is written so."""
    said = _dry_run(import_db, "celery-beat", settings="tests.settings_import_custom")
    assert said["CELERY_BEAT_SCHEDULE['odd-mondays']"] == (
        "CELERY_BEAT_SCHEDULE['odd-mondays'] -> odd-mondays: would import, calling job "
        "send_report(), 0 0 */2 * 1 in Europe/Paris"
    )


def test_django_q2_cron_rows_whose_fields_croniter_spells_apart_from_cron(
    import_db: str,
) -> None:
    """django-q2 (croniter) reads ``5-5`` as the whole field, every hour; cron, and the
    engine, as 5. croniter lists every day of the month for ``1,*/1`` beside a weekday range
    (and writes ``*`` for it beside ``*``): that row runs every day for django-q2 and for
    cron, and is imported as it is (it was refused as one whose days no cron expression could
    say)."""
    _shell(
        import_db,
        """
from django_q.models import Schedule
Schedule.objects.create(name="at five", func="tests.jobsapp.import_tasks.send_report",
    schedule_type="C", cron="0 5-5 * * *")
Schedule.objects.create(name="every day", func="tests.jobsapp.import_tasks.send_report",
    schedule_type="C", cron="0 0 1,*/1 * 0-6")
""",
    )
    said = _dry_run(import_db, "django-q2")
    assert said["django-q2 Schedule 'at five'"] == (
        "django-q2 Schedule 'at five' -> at-five: would import, calling job send_report(), "
        "0 5-5 * * *; django-q2 (croniter) reads a range of one value in '0 5-5 * * *' as the "
        "whole field (every value); here it is that value, as cron reads it: '0 5 * * *'"
    )
    assert said["django-q2 Schedule 'every day'"] == (
        "django-q2 Schedule 'every day' -> every-day: would import, calling job send_report(), "
        "0 0 1,*/1 * 0-6"
    )
