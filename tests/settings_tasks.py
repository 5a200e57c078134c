"""Test settings with Django's Tasks framework, for the ``db_worker``, ``cronworker`` and
``runlocked --enqueue`` subprocesses of the Tasks delivery tests.

``django.tasks`` on Django 6.0+, else the ``django-tasks`` backport; ``default`` is
django-tasks-db's database backend on the test database, ``immediate`` runs a task inside
``enqueue()``. The pytest process keeps ``tests.settings``.
"""

from importlib.util import find_spec

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

#: Django 6.0+ ships the framework; Django 5.2 needs the backport (and its app, for checks).
FRAMEWORK = "django.tasks" if find_spec("django.tasks") else "django_tasks"

INSTALLED_APPS = [
    *INSTALLED_APPS,
    *(["django_tasks"] if FRAMEWORK == "django_tasks" else []),
    "django_tasks_db",
]

TASKS = {
    "default": {"BACKEND": "django_tasks_db.DatabaseBackend"},
    "immediate": {"BACKEND": f"{FRAMEWORK}.backends.immediate.ImmediateBackend"},
}
