"""The admin's link from a run to its task result (``JobRun.task_id``)."""

from __future__ import annotations

from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

#: The admin page of a django-tasks-db task result, where that backend's admin is installed.
DB_RESULT_URL = "admin:django_tasks_database_dbtaskresult_change"


def task_link(task_id: str) -> str:
    """The task result id, linked to its admin page when the backend has one; ``"—"``
    without a task."""
    if not task_id:
        return "—"
    try:
        url = reverse(DB_RESULT_URL, args=[task_id])
    except NoReverseMatch:
        return task_id
    return format_html('<a href="{}">{}</a>', url, task_id)
