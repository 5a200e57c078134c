"""The runs page links a run's task id to its django-tasks-db result page only where that page
exists: a run delivered through the Tasks framework's database backend, never a Celery task id
(nor any other queue's), with no query per row.

The page is read with Django's test client in a process whose settings install django-tasks-db
and its admin (``tests.settings_tasks``), against the test database."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.test_tasks_delivery import SETTINGS, tasks_db  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("transactional_db")

RESULT_LINK = r"/dbtaskresult/([^/\"]+)/change/"

#: Runs in the test settings' process: a real task result of the Tasks delivery's own task,
#: runs pointing at it and at Celery task ids, the page read twice (more rows the second time).
SCRIPT = """
import json, uuid
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django_advisory_cron.contrib.tasks.task import tick_task
from django_advisory_cron.models import JobRun

def run(job, task_id):
    now = timezone.now()
    JobRun.objects.create(job=job, host="h", pid=1, started=now, finished=now,
                          status="succeeded", task_id=task_id)

def page(client):
    with CaptureQueriesContext(connection) as queries:
        body = client.get(reverse("admin:django_advisory_cron_jobrun_changelist")).content
    return body.decode(), len(queries)

tasks_id = str(tick_task().enqueue("links.tasks", timezone.now().isoformat(), []).id)
celery_id = str(uuid.uuid4())
run("links.tasks", tasks_id)
run("links.celery", celery_id)
run("links.custom", "custom-celery-id")
client = Client()
client.force_login(User.objects.create_superuser("links", password="pw"))
first, first_queries = page(client)
for number in range(6):
    run("links.tasks", tasks_id)
    run("links.celery", str(uuid.uuid4()))
second, second_queries = page(client)
change = client.get(reverse("admin:django_advisory_cron_jobrun_change", args=[
    JobRun.objects.get(task_id=celery_id).pk])).content.decode()
print(json.dumps({
    "tasks_id": tasks_id, "celery_id": celery_id, "page": first, "change": change,
    "result_url": reverse("admin:django_tasks_database_dbtaskresult_change", args=[tasks_id]),
    "queries": [first_queries, second_queries],
}))
"""


def test_only_a_tasks_result_is_linked(tasks_db: str, manage: Any) -> None:  # noqa: F811
    done = manage("shell", SETTINGS, "-c", SCRIPT)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    page, tasks_id, celery_id = found["page"], found["tasks_id"], found["celery_id"]
    assert f'<a href="{found["result_url"]}">{tasks_id}</a>' in page
    assert celery_id in page and "custom-celery-id" in page
    # The Tasks run's link, and no other (the sidebar links the results' list, not a result).
    assert re.findall(RESULT_LINK, page) == [tasks_id]
    assert celery_id in found["change"] and not re.findall(RESULT_LINK, found["change"])
    first, second = found["queries"]
    assert first == second, found["queries"]  # flat: none per row
