"""``tests.settings_import`` with none of its Celery tasks allowed (SCHEDULE_CELERY_TASKS at
its default): what ``cronjob import --deliver celery`` refuses."""

from tests.settings_import import *  # noqa: F403

ADVISORY_CRON = {"JOBS_MODULE": "import_tasks"}
