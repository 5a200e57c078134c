"""Jobs whose schedules never fire, registered the way ``@locked_task`` would refuse them:
built as ``Job(...)`` and put in the registry directly. Loaded only by
``tests.badjobs_never.settings``."""

from django_advisory_cron.jobs.job import Job, locked_task, registry


def thirtieth_of_february() -> None:
    """There is no 30 February."""


registry.register(Job(func=thirtieth_of_february, name="thirtieth_of_february", cron="0 0 30 2 *"))


@locked_task(schedule="0 0 30 2 1")
def mondays_in_february() -> None:
    """Day 30 or a Monday: cron ORs the two day fields, so this fires every Monday in
    February."""


@locked_task(schedule="0 0 29 2 *")
def leap_days() -> None:
    """Once every four years (eight around 2100)."""


@locked_task(every=2)
def every_two_seconds() -> None:
    """A normal job beside them."""
