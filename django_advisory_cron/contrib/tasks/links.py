"""The admin's link from a run to its task result (``JobRun.task_id``), where there is one."""

from __future__ import annotations

from typing import Any

from django.db import router
from django.db.models import Case, Exists, OuterRef, QuerySet, UUIDField, When
from django.db.models.functions import Cast
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

#: The admin page of a django-tasks-db task result, where that backend's admin is installed.
DB_RESULT_URL = "admin:django_tasks_database_dbtaskresult_change"
#: A task id that can be a django-tasks-db result's (a UUID as text); others (a Celery task
#: id of a custom form) are not cast, which would fail the whole query.
UUID_TEXT = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


def result_admin() -> bool:
    """Whether django-tasks-db's result admin is installed (its pages can be linked)."""
    try:
        reverse(DB_RESULT_URL, args=["0"])
    except NoReverseMatch:
        return False
    return True


def with_results(runs: QuerySet[Any]) -> QuerySet[Any]:
    """``runs`` annotated ``has_task_result``: whether the run's task id is a django-tasks-db
    result, so only runs delivered through that backend are linked (a Celery task id is not),
    in the page's own query: no query per row. Unannotated when that admin is not installed,
    or when its results are in another database than the runs (then every id is linked)."""
    if not result_admin():
        return runs
    from django_tasks_db.models import DBTaskResult

    if router.db_for_read(DBTaskResult) != runs.db:
        return runs
    as_uuid = Case(When(task_id__regex=UUID_TEXT, then=Cast("task_id", UUIDField())))
    results = DBTaskResult.objects.filter(pk=OuterRef("task_result_id"))
    linked: QuerySet[Any] = runs.annotate(task_result_id=as_uuid)
    found: Exists = Exists(results)
    annotated: QuerySet[Any] = linked.annotate(has_task_result=found)
    return annotated


class ResultLinks:
    """The ``"tasks"`` target's [TaskLinks][django_advisory_cron.delivery.targets.TaskLinks]:
    django-tasks-db's result pages."""

    def annotate(self, runs: QuerySet[Any]) -> QuerySet[Any]:
        return with_results(runs)

    def link(self, task_id: str, run: Any) -> str:
        return task_link(task_id, getattr(run, "has_task_result", None))


def task_link(task_id: str, has_result: bool | None = None) -> str:
    """The task result id, linked to its admin page when the backend has one (``has_result``,
    from [with_results][django_advisory_cron.contrib.tasks.links.with_results]: whether the
    result is there; ``None``: unknown, linked); ``"—"`` without a task."""
    if not task_id:
        return "—"
    if has_result is False:
        return task_id
    try:
        url = reverse(DB_RESULT_URL, args=[task_id])
    except NoReverseMatch:
        return task_id
    return format_html('<a href="{}">{}</a>', url, task_id)
