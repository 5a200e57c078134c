"""Importing the test modules registers no job of a jobs module that only subprocesses load:
such a job stays in the test process's registry for good, where later tests' checks (pooling,
schedules) see it and fail depending on the order tests ran in."""

from __future__ import annotations

from django.conf import settings

from django_advisory_cron.conf import app_settings
from django_advisory_cron.jobs.job import registry


def test_only_the_default_jobs_modules_are_loaded_in_the_test_process() -> None:
    default = {f"{app}.{app_settings.JOBS_MODULE}" for app in settings.INSTALLED_APPS}
    modules = {job.func.__module__ for job in registry.all()}
    leaked = sorted(module for module in modules if module.startswith("tests.jobsapp."))
    assert set(leaked) <= default, leaked
