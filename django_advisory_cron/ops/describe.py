"""A cron expression in words, for people reading the Jobs page, ``cronstatus`` and
``cronjob list``: cron-descriptor's wording (a maintained library, in many forms), with two
things of this app's own.

- The seconds field comes last here (croniter's order), first for cron-descriptor.
- The two day fields follow the rule of [cron_reading][django_advisory_cron.core.cron_reading]:
  when both are restricted, a day matches both if either starts with ``*`` (``*/2``), else
  either one. cron-descriptor's wording of that case differs between its versions, so the
  weekday is described apart and joined with "and" or "or" here.

An expression it cannot put in words is shown as it is.
"""

from __future__ import annotations

import functools

from cron_descriptor import ExpressionDescriptor, Options

from ..core.cron_reading import ALIASES


def _options() -> Options:
    options = Options()
    options.use_24hour_time_format = True
    options.verbose = False
    return options


@functools.lru_cache(maxsize=4096)
def describe(expression: str) -> str:
    """``expression`` in words ("At 09:30, Monday through Friday"), or as it is. Kept per
    expression: the library reads its translations anew for each description (about 0.3 ms),
    and a page of jobs shares a few expressions."""
    fields = ALIASES.get(expression.strip(), expression).split()
    if len(fields) not in (5, 6):
        return expression
    seconds = fields[5:]
    minute, hour, day, month, weekday = fields[:5]
    both = day != "*" and weekday != "*"
    try:
        described = _said([*seconds, minute, hour, day, month, "*" if both else weekday])
        if both:
            days = ExpressionDescriptor(f"* * * * {weekday}", _options())
            clause = days.get_day_of_week_description().lstrip(", ")
            if day.startswith("*") or weekday.startswith("*"):
                described += f", and {clause}"
            else:
                described += f", or {clause.removeprefix('only ')}"
    except Exception:  # whatever the library cannot read is shown as written
        return expression
    return described


def _said(fields: list[str]) -> str:
    return str(ExpressionDescriptor(" ".join(fields), _options()).get_description())
