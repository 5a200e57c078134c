"""``cronjob import``: two entries of one source that would become schedules of the same name
(django-crontab entries calling the same job with the same arguments, whose derived names are
equal; django-q2 rows sharing a name) are both left out, each with one line naming the other,
and the rest is imported; a second import says the same and writes nothing. Real
``manage.py`` subprocesses against the test database, as in ``test_cronjob_import``."""

from __future__ import annotations

from tests.test_cronjob_import import _manage, _rows, _shell
from tests.test_cronjob_import import import_db as import_db  # a fixture

CLASH = "tests.settings_import_clash"


def _import(url: str, source: str, *extra: str, settings: str) -> tuple[int, list[str]]:
    done = _manage(url, "cronjob", "import", "--from", source, *extra, settings=settings)
    return done.returncode, done.stdout.splitlines()


def test_crontab_entries_deriving_one_name_are_both_refused(import_db: str) -> None:
    for extra in (("--dry-run",), (), ()):  # the dry run, the import, a second import
        code, lines = _import(import_db, "crontab", *extra, settings=CLASH)
        assert code == 2, lines
        clashing = [line for line in lines if "same name" in line]
        assert clashing == [
            "CRONJOBS[0] -> send_report-daily: not imported: CRONJOBS[2] would have the "
            "same name; name each in ADVISORY_CRON['SCHEDULES'] instead (django-crontab's "
            "entries have no names), or add one with 'cronjob add NAME'",
            "CRONJOBS[2] -> send_report-daily: not imported: CRONJOBS[0] would have the "
            "same name; name each in ADVISORY_CRON['SCHEDULES'] instead (django-crontab's "
            "entries have no names), or add one with 'cronjob add NAME'",
        ]
        assert lines[1].startswith("CRONJOBS[1] -> clearsessions: ")
        assert lines[-1].endswith(
            "1 of 3 entries "
            + ("would import" if extra else "imported")
            + " or already there, 2 not (see above)"
            + ("; nothing was written (--dry-run)" if extra else "")
        )
        assert sorted(_rows(import_db)) == ([] if extra else ["clearsessions"])
    assert "already there" in lines[1]


def test_django_q2_rows_sharing_a_name_are_both_refused(import_db: str) -> None:
    _shell(
        import_db,
        """
from django_q.models import Schedule
for cron in ("0 6 * * *", "0 18 * * *"):
    Schedule.objects.create(name="report", func="tests.jobsapp.import_tasks.send_report",
        schedule_type="C", cron=cron)
Schedule.objects.create(name="sessions", func="django.core.management.call_command",
    args="'clearsessions'", schedule_type="C", cron="30 3 * * *")
""",
    )
    for _time in range(2):
        code, lines = _import(import_db, "django-q2", settings="tests.settings_import")
        assert code == 2, lines
        assert [line for line in lines if "same name" in line] == [
            "django-q2 Schedule 'report' (id 1) -> report: not imported: django-q2 Schedule "
            "'report' (id 2) would have the same name; rename one of them in django-q2",
            "django-q2 Schedule 'report' (id 2) -> report: not imported: django-q2 Schedule "
            "'report' (id 1) would have the same name; rename one of them in django-q2",
        ]
        assert sorted(_rows(import_db)) == ["sessions"]
