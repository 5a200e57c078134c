"""The names ``cronjob import`` gives (issue 37): shell-safe (``send_report-daily``, not
``send_report(daily)``), never a look-alike of a code job's name (an entry named after the job
it calls is that job's schedule, an override; one calling another job is refused), and a
refused line shows the schedule the entry would have become. Real ``manage.py``
subprocesses against the test database, as in ``test_cronjob_import``."""

from __future__ import annotations

from tests.test_cronjob_import import _lines, _manage, _rows
from tests.test_cronjob_import import import_db as import_db  # a fixture

NAMES = "tests.settings_import_names"


def _import(url: str, source: str, *extra: str) -> tuple[int, dict[str, str]]:
    done = _manage(url, "cronjob", "import", "--from", source, *extra, settings=NAMES)
    print(done.stdout + done.stderr)
    return done.returncode, _lines(done)


def test_imported_names_need_no_quoting_and_differ_from_the_code_jobs(import_db: str) -> None:
    code, said = _import(import_db, "crontab", "--dry-run")
    assert code == 2
    assert said["CRONJOBS[0]"] == (
        "CRONJOBS[0] -> send_report-daily: would import, calling job send_report(daily), "
        "0 6 * * * in UTC (TIME_ZONE, not the host's zone)"
    )
    assert said["CRONJOBS[1]"].startswith("CRONJOBS[1] -> purge-days-1: would import, ")
    assert said["CRONJOBS[2]"] == (
        "CRONJOBS[2] -> send_report: would import, the schedule of job send_report (defined "
        "in code), 0 7 * * * in UTC (TIME_ZONE, not the host's zone)"
    )
    assert said["CRONJOBS[3]"] == (
        "CRONJOBS[3] -> proj.cron.gone: refused: there is no registered job 'proj.cron.gone'; "
        "it would be calling job proj.cron.gone(), 0 * * * * in UTC (TIME_ZONE, not the "
        "host's zone)"
    )

    code, said = _import(import_db, "crontab")
    assert code == 2
    rows = _rows(import_db)
    assert sorted(rows) == ["purge-days-1", "send_report", "send_report-daily"]
    assert (rows["send_report"]["override"], rows["send_report"]["cron"]) == (True, "0 7 * * *")
    # Typed as it is printed, with no quoting.
    ran = _manage(import_db, "runlocked", "--manual", "send_report-daily", settings=NAMES)
    assert ran.returncode == 0, ran.stderr

    code, said = _import(import_db, "crontab")
    assert said["CRONJOBS[2]"].startswith("CRONJOBS[2] -> send_report: already there")
    assert _rows(import_db) == rows


def test_an_entry_named_after_the_job_it_calls_is_that_jobs_schedule(import_db: str) -> None:
    code, said = _import(import_db, "celery-beat", "--dry-run")
    assert code == 2
    assert said["CELERY_BEAT_SCHEDULE['send-report']"] == (
        "CELERY_BEAT_SCHEDULE['send-report'] -> send_report: would import, the schedule of job "
        "send_report (defined in code), 0 6 * * * in Europe/Paris"
    )
    assert said["CELERY_BEAT_SCHEDULE['Nightly digest']"] == (
        "CELERY_BEAT_SCHEDULE['Nightly digest'] -> nightly_digest: would import, the schedule "
        "of job nightly_digest (declared in ADVISORY_CRON['SCHEDULES'], in place of its "
        "0 3 * * *), 0 4 * * * in Europe/Paris"
    )
    assert said["CELERY_BEAT_SCHEDULE['send.report']"] == (
        "CELERY_BEAT_SCHEDULE['send.report'] -> send_report-weekly: would import, calling job "
        "send_report(weekly), every 1h; named so, not 'send.report', which is too like job "
        "'send_report' defined in code"
    )
    assert said["CELERY_BEAT_SCHEDULE['Purge']"] == (
        "CELERY_BEAT_SCHEDULE['Purge'] -> Purge: refused: the name 'Purge' is too like job "
        "'purge' defined in code, which it does not call; rename it in the source; it would "
        "be calling job send_report(), every 10m"
    )
    assert said["CELERY_BEAT_SCHEDULE['nightly report (all)']"].startswith(
        "CELERY_BEAT_SCHEDULE['nightly report (all)'] -> nightly-report-all: would import, "
    )
