"""The Timeline page: time across, a row per job, its past runs as bars and its coming ticks
as marks, with the "now" line; zoomed and moved with links (GET parameters), so it works with
no script.

Who may see it: whoever may see the Jobs page (``view_registeredjob``); a run's bar links to
its page for those who may see the run history (``view_jobrun``).

A page holds up to [PER_PAGE][django_advisory_cron.admin.timeline.PER_PAGE] rows, 200 jobs at
once: what overlapped is seen across jobs without turning pages, the axis stays on screen as
the page scrolls, and the name and status filters narrow the rows. Only the page's jobs are
read (one statement), unless a status filter is given: then every job whose name matches is
read, to know which have that status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.admin.views.main import PAGE_VAR, SEARCH_VAR
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy as _

from ..conf import app_settings
from ..jobs import catalog
from ..ops import timeline
from . import timeline_svg
from .common import ReadOnlyAdmin, refused_here

#: Rows on a page.
PER_PAGE = 200
SPAN_VAR, END_VAR, STATUS_VAR = "span", "end", "status"

#: The zoom links, shortest first.
SPAN_LABELS = {
    "1h": _("1 hour"),
    "6h": _("6 hours"),
    "1d": _("1 day"),
    "3d": _("3 days"),
    "7d": _("1 week"),
}


#: The years a window may end in: a week either side stays within what Python and the
#: database both hold.
YEARS = (1971, 9998)


def _end(text: str) -> datetime:
    """A window's end given as an ISO date-time (in the current time zone when it names
    none); raises ``ValueError`` saying why it is not one."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a date and time (such as 2026-12-24T18:00)") from None
    if not YEARS[0] <= value.year <= YEARS[1]:
        raise ValueError(f"{text!r} is not between the years {YEARS[0]} and {YEARS[1]}")
    if timezone.is_naive(value):
        value = timezone.make_aware(value)
    return value


class TimelineAdmin(ReadOnlyAdmin):
    """The "Timeline" entry of the app's section: one page, no change pages."""

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view(self.changelist_view)
        return [path("", view, name="{}_{}_changelist".format(*info))]

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.view_registeredjob")

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The jobs whose name contains ``?q=`` (with ``?status=``: those that show it in the
        window), over ``?span=`` (``1h`` to ``7d``) ending at ``?end=`` (else a quarter of
        the span after now)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        refused = refused_here(request, "Timeline")
        if refused:
            return refused
        query = request.GET
        span_name = query.get(SPAN_VAR, timeline.DEFAULT_SPAN)
        if span_name not in timeline.SPANS:
            self.message_user(
                request,
                f"Timeline: there is no span {span_name!r}; showing 1 day. Choose one of "
                f"{', '.join(timeline.SPANS)}.",
                messages.WARNING,
            )
            span_name = timeline.DEFAULT_SPAN
        span = timeline.SPANS[span_name]
        end = None
        if query.get(END_VAR):
            try:
                end = _end(query[END_VAR])
            except ValueError as error:
                self.message_user(
                    request, f"Timeline: {error}; showing up to now.", messages.WARNING
                )
        status = query.get(STATUS_VAR, "")
        if status and status not in timeline.STATUS_FILTERS:
            self.message_user(
                request,
                f"Timeline: there is no status filter {status!r}; showing every job.",
                messages.WARNING,
            )
            status = ""
        search = query.get(SEARCH_VAR, "").strip()
        jobs = [
            job
            for job in catalog.current(app_settings.lock_database).all()
            if search.casefold() in job.name.casefold()
        ]
        # With a status filter, every matching job is read to know which show it; else only
        # the page's jobs are.
        matching: list[Any] = jobs
        if status:
            window, lanes = timeline.read(jobs, span, end)
            matching = [lane for lane in lanes if lane.has(status)]
        paginator = Paginator(matching, PER_PAGE)
        page = paginator.get_page(query.get(PAGE_VAR))
        if status:
            shown: list[timeline.Lane] = list(page)
        else:
            window, shown = timeline.read(list(page), span, end)
        timeline.add_ticks(window, shown)

        kept = {
            name: value
            for name, value in (
                (SEARCH_VAR, search),
                (STATUS_VAR, status),
                (SPAN_VAR, span_name if span_name != timeline.DEFAULT_SPAN else ""),
                (END_VAR, query.get(END_VAR, "") if end else ""),
            )
            if value
        }

        def link(**changes: Any) -> str:
            values = {**kept, **changes}
            return "?" + urlencode({k: v for k, v in values.items() if v})

        middle = window.starts + window.span / 2
        zoom = [
            {
                "label": label,
                "url": link(
                    span=name,
                    end=(middle + timeline.SPANS[name] / 2).isoformat() if end else "",
                ),
                "current": name == span_name,
            }
            for name, label in SPAN_LABELS.items()
        ]
        moves = {
            "earlier": link(end=(window.ends - span / 2).isoformat()),
            "later": link(end=(window.ends + span / 2).isoformat()),
            "now": link(end="") if end else "",
        }
        runs_url = reverse("admin:django_advisory_cron_jobrun_changelist")
        jobs_url = reverse("admin:django_advisory_cron_registeredjob_changelist")
        can_see_runs = request.user.has_perm(
            f"{self.opts.app_label}.view_jobrun"
        ) or request.user.has_perm(f"{self.opts.app_label}.change_jobrun")
        zone = timezone.get_current_timezone()
        gridlines = [place for place, _at in timeline_svg.grid(window, zone)]
        rows = [
            {
                # Plain values only: a Job is callable, and templates call callables.
                "name": lane.job.name,
                "paused": lane.paused,
                "paused_until": lane.paused_until,
                "no_ticks": lane.no_ticks,
                "crowded": lane.crowded,
                "job_url": f"{jobs_url}?{urlencode({SEARCH_VAR: lane.job.name})}",
                "runs_url": f"{runs_url}?{urlencode({'job': lane.job.name})}"
                if can_see_runs
                else "",
                "schedule": lane.job.schedule_text or "",
                "drawing": timeline_svg.lane(
                    lane, window, gridlines, runs_url if can_see_runs else ""
                ),
            }
            for lane in shown
        ]
        page_links = [
            (number, "" if number in (page.number, paginator.ELLIPSIS) else link(p=number))
            for number in paginator.get_elided_page_range(page.number)
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": _("Timeline"),
            "subtitle": None,
            "opts": self.opts,
            "window": window,
            "axis": timeline_svg.axis(window),
            "rows": rows,
            "zoom": zoom,
            "moves": moves,
            "search": search,
            "status": status,
            "statuses": [
                {"value": value, "label": label, "url": link(status=value, p="")}
                for value, label in timeline.STATUS_FILTERS.items()
            ],
            "all_statuses_url": link(status="", p=""),
            "hidden": {k: v for k, v in kept.items() if k in (SPAN_VAR, END_VAR, STATUS_VAR)},
            "found": paginator.count,
            "page": page,
            "page_links": page_links if paginator.num_pages > 1 else [],
            "zone": str(zone),
            "step": timeline_svg.step_of(window.span),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/django_advisory_cron/timeline.html", context)
