"""A schedule's next ticks in the admin: on its page as saved, and for what its form holds
before it is saved. The form's script (``schedule_preview.js``) asks ``preview/`` as the cron
expression, the interval or the zone is typed, and shows the answer in place; without the
script, a saved schedule's page still lists its ticks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _

from ..conf import app_settings
from ..core.once import Once, read_moment
from ..core.schedule import Every, Schedule
from ..db.execute import database_now
from ..exceptions import InvalidSchedule
from ..jobs import calendars
from ..jobs.definitions import Definition, overridden, to_job
from ..jobs.job import registry
from ..jobs.option_values import calendar as calendar_value
from ..models import JobState
from ..models import Schedule as ScheduleRow
from ..ops import upcoming

#: How many ticks a schedule's page lists (``cronjob next`` lists more).
NEXT_TICKS = 5


def saved_ticks(row: ScheduleRow, definition: Definition) -> str:
    """The next ticks of a saved schedule (HTML), marked as ``cronjob next`` marks them, or
    why it has none."""
    if definition.problems():
        return "-"
    if not definition.enabled:
        return _("none: it is disabled")
    job = (
        overridden(registry.get(row.name), definition)
        if definition.override
        else to_job(definition)
    )
    schedule = job.schedule
    if schedule is None:
        return _("none: it runs when called")
    return format_html_join(
        "",
        '<div class="next-tick">{} {} <span class="help">{}</span></div>',
        (
            (tick.when, tick.offset, tick.note)
            for tick in _ticks(
                schedule, row.name, _Calendared(row.name, job.calendar, job.timezone)
            )
        ),
    )


@dataclass(frozen=True)
class _Calendared:
    """What a tick's calendar skip needs of a job (see ``calendars.reasons``)."""

    name: str
    calendar: str | None
    timezone: str | None


def box(url: str, inner: str) -> str:
    """Where the ticks show on the form: the script replaces what is inside as people type."""
    return format_html('<div class="next-ticks" data-preview="{}">{}</div>', url, inner)


def preview(request: HttpRequest) -> JsonResponse:
    """The next ticks of the cron expression (``cron``, in ``timezone``) or interval
    (``every`` seconds) given, with the pause of the job ``name`` if it has one; or the
    problems the form would show for them."""
    values: dict[str, Any] = {
        "name": request.GET.get("name", "").strip() or "preview",
        "cron": request.GET.get("cron", "").strip(),
        "timezone": request.GET.get("timezone", "").strip(),
        "every": _number(request.GET.get("every", "").strip()),
    }
    typed = " ".join(request.GET.get(part, "").strip() for part in ("at_0", "at_1")).strip()
    try:  # a one-off's date and time, in its zone as the form reads them
        values["at"] = read_moment(typed, values["timezone"] or None) if typed else None
    except ValueError as error:
        return JsonResponse({"ticks": [], "problems": [str(error)]})
    problems = Definition.from_values(values).problems_by_kind()["schedule"]
    try:  # a calendar refused as the form refuses it
        calendar = calendar_value(request.GET.get("calendar", "").strip())
    except ValueError as error:
        problems = [*problems, str(error)]
    if problems:
        return JsonResponse({"ticks": [], "problems": problems})
    try:
        if values["at"] is not None:
            schedule: Schedule = Once(values["at"], zone=values["timezone"] or None)
        elif values["cron"]:
            schedule = Schedule(values["cron"], zone=values["timezone"] or None)
        else:
            schedule = Every(values["every"])
        zone = values["timezone"] or None
        ticks = _ticks(schedule, values["name"], _Calendared(values["name"], calendar, zone))
    except (InvalidSchedule, ValueError) as error:
        return JsonResponse({"ticks": [], "problems": [str(error)]})
    shown = [{"when": t.when, "offset": t.offset, "note": t.note} for t in ticks]
    return JsonResponse({"zone": upcoming.zone_of(schedule), "ticks": shown, "problems": []})


def _ticks(schedule: Schedule, name: str, job: _Calendared) -> list[upcoming.Upcoming]:
    using = app_settings.lock_database
    state = JobState.objects.using(using).filter(job=name).first()
    off = (lambda ticks: calendars.reasons(job, ticks, using)) if job.calendar else None
    return upcoming.next_ticks(schedule, database_now(using), NEXT_TICKS, state, calendar=off)


def _number(text: str) -> float | str | None:
    """A typed interval: seconds as a number, other text as it is (the rules say why)."""
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return text
