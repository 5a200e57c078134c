"""Admin pages: held locks (with a guarded terminate action), registered jobs, run history,
and the schedules kept in the database.

Only the schedules are editable, with Django's model permissions. The held-locks list costs
one query per page: rows, total count (a window function) and every computed column come back
together, so 5,000 locks cost one scan of the server's lock table rather than one per count,
page and row. The sessions' query text is shown and searched only with its own permission:
it may hold other applications' secrets.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from datetime import datetime, time, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, Literal

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ALL_VAR, PAGE_VAR, SEARCH_VAR, ChangeList
from django.core.exceptions import PermissionDenied
from django.core.management import get_commands
from django.core.paginator import InvalidPage, Page, Paginator
from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, QuerySet, Window
from django.db.models.constants import LOOKUP_SEP
from django.db.models.expressions import Combinable
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    QueryDict,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

from .conf import app_settings
from .contrib.tasks.links import task_link
from .core.statuses import SKIPS
from .db.execute import database_now
from .models import HeldLock, JobRun, JobState, RegisteredJob, RunStatus, Schedule
from .ops import charts, heldlocks, status
from .ops.charts import AMBER, GREEN, GREY, RED, STATUS_COLOURS, human_duration
from .run import catalog, control
from .run.definitions import Definition
from .run.jobs import Job, registry
from .templatetags.advisory_cron_admin import breakable, when
from .worker.fleet import live_workers

logger = logging.getLogger("django_advisory_cron")

BADGE = (
    '<span style="display:inline-block;padding:1px 6px;border-radius:4px;font-weight:bold;'
    'color:#fff;background:{};">{}</span>'
)


def badge(colour: str, text: Any) -> str:
    return format_html(BADGE, colour, text)


class _ChoiceFilter(admin.SimpleListFilter):
    """A filter with fixed choices: the URL value is compared in Python, never sent to SQL."""

    options: dict[str, tuple[StrOrPromise, dict[str, Any]]] = {}

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, str(label)) for value, (label, _lookup) in self.options.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        choice = self.options.get(self.value() or "")
        return queryset if choice is None else queryset.filter(**choice[1])


class OursFilter(_ChoiceFilter):
    title = _("owner")
    parameter_name = "ours"
    options = {
        "yes": (_("this app's locks"), {"ours": True}),
        "no": (_("other advisory locks"), {"ours": False}),
    }


class GrantedFilter(_ChoiceFilter):
    title = _("granted")
    parameter_name = "granted"
    options = {
        "held": (_("held"), {"granted": True}),
        "waiting": (_("waiting"), {"granted": False}),
    }


class StaleFilter(_ChoiceFilter):
    title = _("stale")
    parameter_name = "stale"
    options = {
        "yes": (_("stale"), {"stale": True}),
        "no": (_("not stale"), {"stale": False}),
    }


class WindowCountPaginator(Paginator):  # type: ignore[type-arg]
    """Learns the total from the page query itself, as ``count(*) OVER ()`` on every row.

    ``count`` fetches the rows the request is about to show (``limit`` rows from ``first``)
    with the total alongside, and keeps them: ``page()`` serves them, and ``all_rows``
    has them when they are the whole result. Django's usual ``COUNT`` query and slice remain
    for a requested page past the end, for any other page, and for a ``DISTINCT`` queryset
    (whose window count would count duplicates).
    """

    TOTAL = "total_rows"

    def __init__(
        self,
        object_list: Any,
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
        *,
        first: int = 0,
        limit: int | None = None,
    ) -> None:
        super().__init__(object_list, per_page, orphans, allow_empty_first_page)
        self.first = first
        self.limit = per_page + orphans if limit is None else limit
        self.rows: list[Any] | None = None

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet) or queryset.query.distinct:
            return int(super().count)
        counted = queryset.annotate(**{self.TOTAL: Window(Count("*"))})
        rows = list(counted[self.first : self.first + self.limit])
        if rows:
            self.rows = rows
            return int(getattr(rows[0], self.TOTAL))
        if self.first == 0:
            self.rows = rows  # no rows at all
            return 0
        return int(super().count)  # past the end: the total needs a COUNT of its own

    @property
    def all_rows(self) -> list[Any] | None:
        """Every row of the result, when ``count`` fetched them all."""
        rows = self.rows
        if self.first == 0 and rows is not None and len(rows) == self.count:
            return rows
        return None

    def page(self, number: int | str) -> Page[Any]:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        rows = self.rows
        if rows is not None and self.first <= bottom and top <= self.first + len(rows):
            return Page(rows[bottom - self.first : top - self.first], number, self)
        return super().page(number)


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Viewing needs the model's view permission; nobody may add, change or delete."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(HeldLock)
class HeldLockAdmin(ReadOnlyAdmin):
    class Media:
        css = {"all": ["django_advisory_cron/admin.css"]}

    list_display = (
        "pid",
        "granted_badge",
        "mode",
        "keys_display",
        "job_name",
        "stale_badge",
        "held_for_display",
        "run_display",
        "application_name",
        "client_addr",
        "state",
        "query_short",
    )
    list_filter = (OursFilter, GrantedFilter, StaleFilter)
    search_fields = ("job", "application_name", "usename", "query")
    list_per_page = 100
    list_max_show_all = 500
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = WindowCountPaginator
    actions = ["terminate_backends"]
    readonly_fields = ("keys_display", "job_name", "stale_badge", "held_for_display", "run_display")
    fields = (
        "pid",
        "granted",
        "mode",
        "keys_display",
        "job_name",
        "stale_badge",
        "held_for_display",
        "run_display",
        "waitstart",
        "usename",
        "application_name",
        "client_addr",
        "backend_start",
        "xact_start",
        "query_start",
        "state",
        "wait_event",
        "query",
    )

    #: What shows or searches ``pg_stat_activity.query``: only with ``view_query``.
    QUERY_FIELD, QUERY_COLUMN = "query", "query_short"

    def get_queryset(self, request: HttpRequest) -> QuerySet[HeldLock]:
        queryset = heldlocks.held_locks()
        if not self.has_query_permission(request):
            queryset = queryset.defer(self.QUERY_FIELD)
        return queryset.order_by(*self.get_ordering(request))

    def get_ordering(self, request: HttpRequest) -> list[str | Combinable]:
        return ["-stale", "-held_for", "pid"]

    def get_paginator(
        self,
        request: HttpRequest,
        queryset: QuerySet[Any],
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
    ) -> Paginator[Any]:
        """Count with the rows the changelist is about to show: one query per page."""
        if queryset.model is not self.model:  # the history page pages log entries
            return super().get_paginator(
                request, queryset, per_page, orphans, allow_empty_first_page
            )
        if ALL_VAR in request.GET:
            first, limit = 0, self.list_max_show_all + 1
        else:
            try:
                number = int(request.GET.get(PAGE_VAR, 1))
            except ValueError:
                number = 1
            first, limit = max(number - 1, 0) * per_page, per_page + orphans
        return WindowCountPaginator(
            queryset, per_page, orphans, allow_empty_first_page, first=first, limit=limit
        )

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        changelist = super().get_changelist_instance(request)
        paginator = changelist.paginator
        if isinstance(paginator, WindowCountPaginator):
            if not changelist.show_all:
                try:  # Django shows page 1 for any page number when all rows fit on it
                    paginator.validate_number(changelist.page_num)
                except InvalidPage as error:
                    raise IncorrectLookupParameters from error
            rows = paginator.all_rows
            if rows is not None:
                # When everything fits on one page Django would query the rows again.
                changelist.result_list = rows
        return changelist

    def has_terminate_permission(self, request: HttpRequest) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.terminate_backend")

    def has_query_permission(self, request: HttpRequest) -> bool:
        """``view_query``: the sessions' SQL may carry other applications' secrets."""
        return request.user.has_perm(f"{self.opts.app_label}.view_query")

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)
        if self.has_query_permission(request):
            return shown
        return [name for name in shown if name != self.QUERY_COLUMN]

    def get_search_fields(self, request: HttpRequest) -> Any:
        fields = super().get_search_fields(request)
        if self.has_query_permission(request):
            return fields
        return [name for name in fields if name.lstrip("^=@") != self.QUERY_FIELD]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_fields(request, obj)
        if self.has_query_permission(request):
            return fields
        return [name for name in fields if name != self.QUERY_FIELD]

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """No ``?query__contains=...``: filtering on the text would reveal it."""
        if lookup.split(LOOKUP_SEP)[0] == self.QUERY_FIELD and not self.has_query_permission(
            request
        ):
            return False
        return super().lookup_allowed(lookup, value, request)

    @admin.display(description=_("status"), ordering="granted")
    def granted_badge(self, obj: HeldLock) -> str:
        return badge(GREEN, _("held")) if obj.granted else badge(AMBER, _("waiting"))

    @admin.display(description=_("key"), ordering="objid")
    def keys_display(self, obj: HeldLock) -> str:
        return obj.keys

    @admin.display(description=_("job"), ordering="job")
    def job_name(self, obj: HeldLock) -> str:
        job: str | None = getattr(obj, "job", None)
        if job:
            return job
        lock_name: str | None = getattr(obj, "lock_name", None)
        if lock_name:
            return str(_("%(name)s (advisory_lock, not a job)") % {"name": lock_name})
        if getattr(obj, "ours", False):
            return str(_("unknown job (not registered here)"))
        return "—"

    @admin.display(description=_("stale"), ordering="stale")
    def stale_badge(self, obj: HeldLock) -> str:
        if getattr(obj, "stale", False):
            limit = human_duration(getattr(obj, "limit", None))
            return badge(RED, _("STALE (limit %(limit)s)") % {"limit": limit})
        return ""

    @admin.display(description=_("held / waiting for"), ordering="held_for")
    def held_for_display(self, obj: HeldLock) -> str:
        since = getattr(obj, "since", None)
        return format_html(
            '<span title="{}">{}</span>',
            _("since %(since)s") % {"since": since} if since else "",
            human_duration(getattr(obj, "held_for", None)),
        )

    @admin.display(description=_("run"), ordering="run_host")
    def run_display(self, obj: HeldLock) -> str:
        host = getattr(obj, "run_host", None)
        return f"{host} pid {getattr(obj, 'run_pid', '')}" if host else "—"

    @admin.display(description=_("current query"))
    def query_short(self, obj: HeldLock) -> str:
        query = obj.query or ""
        return format_html('<span title="{}">{}</span>', query, Truncator(query).chars(60))

    @admin.action(
        permissions=["terminate"],
        description=_("Terminate the backends holding the selected locks"),
    )
    def terminate_backends(
        self, request: HttpRequest, queryset: QuerySet[HeldLock]
    ) -> HttpResponse | None:
        if not self.has_terminate_permission(request):
            raise PermissionDenied
        locks = list(queryset)
        selected = len(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))
        if request.POST.get("post") != "yes":
            context = {
                **self.admin_site.each_context(request),
                "title": _("Terminate backends?"),
                "opts": self.opts,
                "locks": locks,
                "pids": sorted({lock.pid for lock in locks}),
                "gone": max(selected - len(locks), 0),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                "select_across": request.POST.get("select_across", "0"),
                "show_query": self.has_query_permission(request),
            }
            return TemplateResponse(
                request, "admin/django_advisory_cron/heldlock/terminate_confirmation.html", context
            )
        self._terminate(request, locks, selected)
        return None

    def _terminate(self, request: HttpRequest, locks: list[HeldLock], selected: int) -> None:
        done, refused = heldlocks.terminate(sorted({lock.pid for lock in locks}))
        user = request.user.get_username()
        for lock in locks:
            if lock.pid in done:
                job = getattr(lock, "job", None) or "-"
                message = f"Terminated backend pid {lock.pid} holding {lock.keys} (job {job})"
                self.log_change(request, lock, message)
                logger.warning("%s (by user %s)", message, user)
        if done:
            self.message_user(
                request,
                ngettext(
                    "Terminated backend %(pids)s.",
                    "Terminated backends %(pids)s.",
                    len(done),
                )
                % {"pids": ", ".join(map(str, done))},
                messages.SUCCESS,
            )
        if refused:
            logger.warning("user %s: refused to terminate pids %s (no lock held)", user, refused)
            self.message_user(
                request,
                _("Refused pids %(pids)s: they hold no advisory lock any more.")
                % {"pids": ", ".join(map(str, refused))},
                messages.WARNING,
            )
        if selected > len(locks):
            self.message_user(
                request,
                _("%(count)d selected lock(s) had already been released.")
                % {"count": selected - len(locks)},
                messages.INFO,
            )


class SkipsFilter(admin.SimpleListFilter):
    """Skip rows (another replica had the lock or the tick, the job was paused) are hidden
    unless asked for: with three replicas they are two rows of every three. Offered only while
    there are skips; a status chosen in the status filter is shown whatever it is."""

    title = _("skips")
    parameter_name = "skips"
    SHOW = "show"
    STATUS_PARAMETERS = ("status", "status__exact")

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        if not model_admin.get_queryset(request).filter(status__in=SKIPS).exists():
            return []
        return [("", str(_("hidden"))), (self.SHOW, str(_("shown")))]

    def choices(self, changelist: ChangeList) -> Any:
        for value, label in self.lookup_choices:
            yield {
                "selected": (self.value() or "") == value,
                "query_string": changelist.get_query_string(
                    {self.parameter_name: value} if value else {}, [self.parameter_name]
                ),
                "display": label,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == self.SHOW or any(key in request.GET for key in self.STATUS_PARAMETERS):
            return queryset
        return queryset.exclude(status__in=SKIPS)


class BoundedCountPaginator(Paginator):  # type: ignore[type-arg]
    """Counts at most ``limit`` rows (a ``count(*)`` over the first ``limit + 1``), so a page
    of the run history costs the same at a thousand runs or a million.

    Past the limit the list says "more than" it (``capped``) and its pages stop there; older
    runs are a filter or a date drill-down away, and those pages count and seek as little.
    """

    limit = 1_000

    @cached_property
    def counted(self) -> int:
        """The rows found, up to ``limit + 1``."""
        rows = self.object_list
        if not isinstance(rows, QuerySet):
            return len(rows)
        return rows.order_by()[: self.limit + 1].count()

    @cached_property
    def count(self) -> int:
        return min(self.counted, self.limit)

    @property
    def capped(self) -> bool:
        """Whether there are more rows than ``count``."""
        return self.counted > self.limit


class JobFilter(admin.SimpleListFilter):
    """The jobs the Jobs page lists (code, settings, the database's schedules): listing the
    names found in the history would read all of it. ``?job=`` still filters on any name, a
    job no longer defined included."""

    title = _("job")
    parameter_name = "job"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = {job.name for job in catalog.current().all()}
        if self.value():
            names.add(str(self.value()))
        return [(name, name) for name in sorted(names)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset if self.value() is None else queryset.filter(job=self.value())


class RunQuerySet(QuerySet[JobRun]):
    """The run list's rows. The date drill-down lists the years, months or days that have
    runs with one index probe each (the first run from the start of the next one on), where
    Django's ``DISTINCT`` over the truncated dates reads every matching row."""

    STEPS = ("year", "month", "day")

    def datetimes(  # type: ignore[override]
        self,
        field_name: str,
        kind: Literal["year", "month", "week", "day", "hour", "minute", "second"],
        order: Literal["ASC", "DESC"] = "ASC",
        tzinfo: tzinfo | None = None,
    ) -> list[datetime]:
        """A list, which is all the drill-down needs; finer steps than a day as Django's."""
        if kind not in self.STEPS:
            return list(super().datetimes(field_name, kind, order, tzinfo))
        zone = tzinfo or timezone.get_current_timezone()
        found: list[datetime] = []
        first = self.aggregate(first=Min(field_name))["first"]
        while first is not None:
            local = first.astimezone(zone)
            start = datetime(
                local.year,
                local.month if kind != "year" else 1,
                local.day if kind == "day" else 1,
                tzinfo=zone,
            )
            found.append(start)
            if kind == "year":
                after = start.replace(year=start.year + 1)
            elif kind == "month":
                after = (start + timedelta(days=32)).replace(day=1)
            else:
                after = datetime.combine(start.date() + timedelta(days=1), time(), tzinfo=zone)
            later = self.filter(**{f"{field_name}__gte": after})
            first = later.aggregate(first=Min(field_name))["first"]
        return found if order == "ASC" else found[::-1]


@admin.register(JobRun)
class JobRunAdmin(ReadOnlyAdmin):
    """The run history in six columns that fit a 1024 px window: the tick under the start
    time, the pid and task id under the host, times to the second."""

    class Media:
        css = {"all": ["django_advisory_cron/admin.css"]}

    list_display = (
        "job_display",
        "status_badge",
        "started_display",
        "duration_display",
        "host_display",
        "error_short",
    )
    list_filter = (SkipsFilter, JobFilter, "status", "started")
    search_fields = ("job", "host", "error", "task_id")
    date_hierarchy = "started"
    list_per_page = 100
    # No full count, no facets: each would read the whole history.
    paginator = BoundedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    fields = (
        "job",
        "status",
        "tick",
        "started",
        "finished",
        "duration_display",
        "host",
        "pid",
        "task",
    )
    readonly_fields = ("duration_display", "task", "error_text")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*self.fields, "error_text"]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Filtered to one job (``?job=``), the page starts with that job's run chart."""
        job = request.GET.get("job")
        if job:
            extra_context = {**(extra_context or {}), "run_chart": charts.job_charts([job])[job]}
        return super().changelist_view(request, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet[JobRun]:
        duration = ExpressionWrapper(F("finished") - F("started"), output_field=DurationField())
        queryset: QuerySet[JobRun] = super().get_queryset(request)
        runs = RunQuerySet(self.model, query=queryset.query, using=app_settings.lock_database)
        return runs.annotate(elapsed=duration)

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, obj: JobRun) -> str:
        return badge(STATUS_COLOURS.get(RunStatus(obj.status), GREY), obj.get_status_display())

    @admin.display(description=_("job"), ordering="job")
    def job_display(self, obj: JobRun) -> str:
        return breakable(obj.job)

    @admin.display(description=_("started / tick"), ordering="started")
    def started_display(self, obj: JobRun) -> str:
        if obj.tick is None:
            return when(obj.started)
        return format_html(
            '{}<div class="help">{} {}</div>', when(obj.started), _("tick"), when(obj.tick)
        )

    @admin.display(description=_("host / pid / task"), ordering="host")
    def host_display(self, obj: JobRun) -> str:
        """Where the run ran: the host, its pid and, for a delivered run, the task id."""
        shown = format_html('{}<div class="help">pid {}</div>', breakable(obj.host), obj.pid)
        if not obj.task_id:
            return shown
        return format_html('{}<div class="help">{} {}</div>', shown, _("task"), self.task(obj))

    @admin.display(description=_("duration"), ordering="elapsed")
    def duration_display(self, obj: JobRun) -> str:
        return human_duration(obj.duration)

    @admin.display(description=_("task"), ordering="task_id")
    def task(self, obj: JobRun) -> str:
        """The task result id of a run delivered through a task queue, linked to its page."""
        return task_link(obj.task_id)

    @admin.display(description=_("error"))
    def error_short(self, obj: JobRun) -> str:
        last_line = (obj.error.strip().splitlines() or [""])[-1]
        return breakable(Truncator(last_line).chars(80))

    @admin.display(description=_("error"))
    def error_text(self, obj: JobRun) -> str:
        if not obj.error:
            return "—"
        return format_html('<pre style="white-space:pre-wrap;margin:0">{}</pre>', obj.error)


#: Where a job is defined, by its ``source``.
ORIGINS = {
    "code": _("defined in code"),
    "settings": _("defined in settings"),
    "database": _("defined in the database"),
}


def override_text(job: Job[..., Any]) -> str:
    """What the database's override of the code (or settings) ``job`` changes:
    ``schedule overridden: every 30s (code: 0 2 * * *)``, ``disabled by an override``."""
    changes: list[StrOrPromise] = []
    if {"cron", "every", "timezone"} & set(job.overridden):
        original = registry.get(job.name)
        changes.append(
            _("schedule overridden: %(now)s (%(source)s: %(was)s)")
            % {
                "now": schedule_with_zone(job),
                "source": job.source,
                "was": schedule_with_zone(original),
            }
        )
    if "enabled" in job.overridden:
        changes.append(_("enabled by an override") if job.enabled else _("disabled by an override"))
    return "; ".join(map(str, changes)) or str(_("overridden, without a change"))


def schedule_with_zone(job: Job[..., Any]) -> str:
    """``0 2 * * * Europe/Berlin``, ``every 30s``, or ``no schedule``."""
    text = job.schedule_text or str(_("no schedule"))
    return f"{text} {job.timezone}" if job.timezone and job.cron else text


def jobs_page(query: QueryDict) -> str:
    """The Jobs page at the page and search of ``query`` (whatever else it holds)."""
    kept = {name: str(query.get(name)) for name in (SEARCH_VAR, PAGE_VAR) if query.get(name)}
    url = reverse("admin:django_advisory_cron_registeredjob_changelist")
    return f"{url}?{urlencode(kept)}" if kept else url


@admin.register(RegisteredJob)
class RegisteredJobAdmin(ReadOnlyAdmin):
    """The "Jobs" page: registered jobs come from code, their state from the database.

    With the ``operate_job`` permission each row has Pause / Resume / Run now buttons: POST
    (with Django's CSRF check) to one view, recorded in the admin's log (``LogEntry``).
    """

    OPERATIONS = ("pause", "resume", "run")
    #: Jobs shown on a page: each row draws a chart of its last 50 runs.
    list_per_page = 50

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view(self.changelist_view)
        operate = self.admin_site.admin_view(self.operate_view)
        return [
            path("", view, name="{}_{}_changelist".format(*info)),
            path("operate/", operate, name="{}_{}_operate".format(*info)),
        ]

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """``operate_job``: pause, resume and run jobs now."""
        return request.user.has_perm(f"{self.opts.app_label}.operate_job")

    def operate_view(self, request: HttpRequest) -> HttpResponse:
        """Pause, resume or run now the job named in the POST; back to the Jobs page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_operate_permission(request):
            raise PermissionDenied
        back = HttpResponseRedirect(jobs_page(QueryDict(request.POST.get("back", ""))))
        name = request.POST.get("job", "")
        operation = request.POST.get("operation", "")
        alias = app_settings.lock_database
        if operation not in self.OPERATIONS or name not in catalog.current(alias):
            self.message_user(
                request, _("There is no job named %(job)s.") % {"job": name}, messages.ERROR
            )
            return back
        user = request.user.get_username()
        if operation == "pause":
            until = None
            if request.POST.get("until", "").strip():
                try:
                    until = control.parse_until(request.POST["until"], database_now(alias))
                except ValueError as error:
                    self.message_user(request, f"Job {name}: {error}", messages.ERROR)
                    return back
            row = control.pause(
                name, until=until, by=user, reason=request.POST.get("reason", "").strip()
            )
            message = f"{name}: {control.describe_pause(row)}"
        elif operation == "resume":
            control.resume(name)
            message = f"{name}: resumed"
        else:
            if not live_workers(alias):
                self.message_user(
                    request,
                    _(
                        "Job %(job)s: no cronworker is connected to the database, so nothing would "
                        "run it; nothing was recorded. Start manage.py cronworker, or run "
                        "manage.py cronjob trigger --here %(job)s."
                    )
                    % {"job": name},
                    messages.ERROR,
                )
                return back
            control.request_run(name, by=user)
            message = f"{name}: run requested; a cronworker starts it within about a second"
        state = JobState.objects.using(alias).get(job=name)
        self.log_change(request, state, message)
        logger.info("%s (by user %s)", message, user)
        # "Job ..." first: the admin capitalises a message's first letter, not a job's name.
        self.message_user(request, f"Job {message}", messages.SUCCESS)
        return back

    @staticmethod
    def _origin(request: HttpRequest, job: Job[..., Any]) -> dict[str, Any]:
        """Where ``job`` is defined, what an override changes of it, and the links to its
        schedule the user's permissions allow: plain values for the template."""
        user, app = request.user, "django_advisory_cron"
        may_see = user.has_perm(f"{app}.view_schedule") or user.has_perm(f"{app}.change_schedule")
        # A code or settings job read with an override has the time it was edited.
        has_override = job.source != "database" and job.edited is not None
        named = reverse("admin:django_advisory_cron_schedule_named", args=[job.name])
        origin: dict[str, Any] = {
            "origin": ORIGINS[job.source],
            "override": override_text(job) if has_override else "",
            "schedule_url": named if may_see and (has_override or job.source == "database") else "",
            "override_url": "",
            "reset": has_override and user.has_perm(f"{app}.delete_schedule"),
        }
        if not has_override and job.source != "database" and user.has_perm(f"{app}.add_schedule"):
            url = reverse("admin:django_advisory_cron_schedule_add")
            origin["override_url"] = f"{url}?{urlencode({'override': '1', 'name': job.name})}"
        return origin

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """A page of jobs, those with a problem first, then by name; ``?q=`` keeps those
        whose name contains it. The summary counts every job; only the page's jobs get
        their run charts drawn."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        runs_url = reverse("admin:django_advisory_cron_jobrun_changelist")
        locks_url = reverse("admin:django_advisory_cron_heldlock_changelist")
        statuses = status.job_statuses()
        troubled = {item.name for item in statuses if item.problems}
        search = request.GET.get(SEARCH_VAR, "").strip()
        found = [item for item in statuses if search.casefold() in item.name.casefold()]
        found.sort(key=lambda item: item.name not in troubled)  # stable: by name within
        paginator = Paginator(found, self.list_per_page)
        page = paginator.get_page(request.GET.get(PAGE_VAR))
        kept = {SEARCH_VAR: search} if search else {}
        page_links = [
            (
                number,
                ""
                if number in (page.number, paginator.ELLIPSIS)
                else f"?{urlencode({**kept, PAGE_VAR: number})}",
            )
            for number in paginator.get_elided_page_range(page.number)
        ]
        strips = charts.job_charts([item.name for item in page])
        rows = [
            {
                "status": item,
                "runs_url": f"{runs_url}?{urlencode({'job': item.name})}",
                "locks_url": f"{locks_url}?{urlencode({'q': item.name})}",
                "max_runtime": human_duration(item.job.max_runtime)
                if item.job.max_runtime
                else "—",
                "last_duration": human_duration(item.last_run.duration) if item.last_run else "—",
                # Plain values only: a Job is callable, and templates call callables.
                "key": str(item.job.key),
                "cron": item.job.schedule_text or "",
                "scope": item.job.scope,
                "description": item.job.description,
                "chart": strips[item.name],
                "paused": item.paused,
                "run_requested": item.run_requested,
                "enabled": item.job.enabled,
                **self._origin(request, item.job),
            }
            for item in page
        ]
        workers = live_workers()
        context = {
            **self.admin_site.each_context(request),
            "title": _("Jobs"),
            "workers": workers,
            "workers_problem": status.missing_workers(
                statuses, workers, app_settings.EXPECT_WORKERS
            ),
            "subtitle": None,
            "opts": self.opts,
            "rows": rows,
            "total": len(statuses),
            "problems": len(troubled),
            "paused": sum(1 for item in statuses if item.paused),
            "search": search,
            "found": paginator.count,
            "page": page,
            "page_links": page_links if paginator.num_pages > 1 else [],
            "can_operate": self.has_operate_permission(request),
            "operate_url": reverse("admin:django_advisory_cron_registeredjob_operate"),
            "reset_url": reverse("admin:django_advisory_cron_schedule_reset"),
            # Where an operation brings the operator back: this page, this search.
            "back": urlencode(kept | ({PAGE_VAR: page.number} if page.number > 1 else {})),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, "admin/django_advisory_cron/registeredjob/change_list.html", context
        )


#: Where a schedule's problem shows on its form: the field of the first pattern that matches
#: the start of the problem (as [problems][django_advisory_cron.run.definitions.Definition.problems]
#: words them); a problem no pattern matches shows above the form.
PROBLEM_FIELDS = [
    (re.compile(pattern), field)
    for pattern, field in (
        (
            r"a schedule needs a name|the name |there is no job .* defined in code to override$",
            "name",
        ),
        (r"there is no registered job ", "job"),
        (r"job .* cannot be called with these arguments: ", "args"),
        (r"there is no management command ", "command"),
        (r"manage\.py \S+ has no option ", "kwargs"),
        (r"manage\.py \S+(:| refuses) these arguments", "args"),
        (r"the arguments must ", "args"),
        (r"the keyword arguments must ", "kwargs"),
        (r"the interval must ", "every"),
        (r"a time zone |timezone ", "timezone"),
        (r"bad cron expression: |'.*' never fires: ", "cron"),
        (r"catch-up ", "catch_up"),
        (r"the max lateness ", "max_lateness"),
        (r"the timeout ", "timeout"),
        (r"deliver |unknown delivery ", "deliver"),
        (r"the schedule ends before it starts", "ends"),
    )
]


def problem_field(problem: str) -> str | None:
    """The form field ``problem`` is about, or ``None`` (the form as a whole)."""
    return next((field for pattern, field in PROBLEM_FIELDS if pattern.match(problem)), None)


def definition_of(schedule: Schedule) -> Definition:
    """What a row of the database's schedules says."""
    fields = schedule._meta.concrete_fields
    return Definition.from_values(
        {field.attname: getattr(schedule, field.attname) for field in fields}
    )


def choices(names: Iterable[str], current: str) -> list[tuple[str, str]]:
    """A blank choice, then ``names`` by name. ``current`` (the row's saved value) is offered
    too: editing a schedule whose job left the code shows that job, and the check says why it
    cannot run, rather than a blank field."""
    return [("", "---------"), *((name, name) for name in sorted({*names, current} - {""}))]


class ScheduleForm(forms.ModelForm):  # type: ignore[type-arg]
    """A schedule as typed in the admin, checked as ``manage.py cronjob add`` checks one: every
    problem of its [Definition][django_advisory_cron.run.definitions.Definition] is a form
    error, on its field. It calls only a registered job or an installed management command,
    chosen from a list: never a dotted path."""

    job = forms.ChoiceField(
        label=_("Job"),
        required=False,
        help_text=_("The registered job it calls, with the arguments below."),
    )
    command = forms.ChoiceField(
        label=_("Management command"),
        required=False,
        help_text=_("Or the management command it calls: one of the two."),
    )

    class Meta:
        model = Schedule
        fields = (
            *("name", "override", "description", "job", "command", "args", "kwargs"),
            *("cron", "every", "timezone", "enabled", "starts", "ends"),
            *("catch_up", "max_lateness", "timeout", "deliver"),
        )
        widgets = {
            "args": forms.Textarea(attrs={"rows": 2, "cols": 60}),
            "kwargs": forms.Textarea(attrs={"rows": 2, "cols": 60}),
        }
        help_texts = {
            "name": _(
                "The job name its runs, lock and ticks go by. For an override, the name of "
                "the job defined in code."
            ),
            "override": _(
                "Change the schedule (cron, interval, time zone, enabled) of the job of this "
                "name defined in code, instead of adding a job. It calls nothing else."
            ),
            "args": _('A JSON list, such as ["nightly", 3].'),
            "kwargs": _(
                'A JSON object, such as {"note": "from the admin"}; for a command, its '
                "options by name."
            ),
            "cron": _(
                "Five fields (minute hour day month weekday), or six with the seconds last; "
                "or leave it empty and give an interval."
            ),
            "every": _("An interval in seconds, instead of a cron expression."),
            "timezone": _(
                "The IANA time zone of the cron expression, such as Europe/Berlin (empty: "
                "TIME_ZONE)."
            ),
            "enabled": _("A disabled schedule has no ticks; Run now still runs it."),
            "catch_up": _("Which missed ticks run after a gap (empty: the CATCH_UP setting)."),
            "deliver": _(
                'Empty: the worker runs it; "tasks" or "tasks:<backend alias>": through '
                "Django's Tasks framework."
            ),
            "starts": _("Its first possible tick (empty: no start)."),
            "ends": _("Its last possible tick (empty: no end)."),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        saved = self.instance
        jobs = (job.name for job in registry.all())
        self.fields["job"].choices = choices(jobs, saved.job)  # type: ignore[attr-defined]
        self.fields["command"].choices = choices(get_commands(), saved.command)  # type: ignore[attr-defined]

    def clean_args(self) -> Any:
        """An empty field is no arguments."""
        value = self.cleaned_data["args"]
        return [] if value is None else value

    def clean_kwargs(self) -> Any:
        value = self.cleaned_data["kwargs"]
        return {} if value is None else value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:  # a field that does not parse says so itself
            return cleaned
        definition = Definition.from_values(cleaned)
        for problem in definition.problems(known=self._others(definition.name)):
            self.add_error(problem_field(problem), problem)
        return cleaned

    def _others(self, name: str) -> list[Job[..., Any]]:
        """The jobs the schedule must not clash with, by name or lock key: every job but
        itself (as saved), and but a database schedule of the new name, which the name's own
        uniqueness check reports."""
        mine = {name, self.instance.name} if self.instance.pk else {name}
        return [
            job
            for job in catalog.current().all()
            if job.source != "database" or job.name not in mine
        ]


class KindFilter(_ChoiceFilter):
    title = _("kind")
    parameter_name = "kind"
    options = {
        "job": (_("calls a job"), {"override": False, "command": ""}),
        "command": (_("runs a command"), {"override": False, "job": ""}),
        "override": (_("overrides a code job"), {"override": True}),
    }


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Schedules kept in the database: adding, changing and deleting them need Django's
    ``add_schedule``, ``change_schedule`` and ``delete_schedule``; each change is in the
    admin's log with its user, who is also the row's ``changed_by``. They are read from and
    written to the lock database, where the workers read them."""

    class Media:
        css = {"all": ["django_advisory_cron/admin.css"]}

    form = ScheduleForm
    list_display = (
        "name_display",
        "calls",
        "schedule_display",
        "enabled",
        "kind",
        "changed_display",
    )
    list_filter = ("enabled", KindFilter)
    search_fields = ("name", "job", "command", "description", "changed_by")
    readonly_fields = ("created", "changed", "changed_by")
    list_per_page = 100
    fieldsets = [
        (None, {"fields": ("name", "override", "description")}),
        (_("What it calls"), {"fields": ("job", "command", "args", "kwargs")}),
        (_("When"), {"fields": ("cron", "every", "timezone", "enabled", "starts", "ends")}),
        (_("Options"), {"fields": ("catch_up", "max_lateness", "timeout", "deliver")}),
        (_("Changes"), {"fields": ("created", "changed", "changed_by")}),
    ]

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        """Who changed it when, once it exists (the last fieldset)."""
        fieldsets = super().get_fieldsets(request, obj)
        return fieldsets if obj is not None else fieldsets[:-1]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        return super().get_queryset(request).using(app_settings.lock_database)

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        obj.changed_by = request.user.get_username()[:150]
        obj.save(using=app_settings.lock_database)

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        obj.delete(using=app_settings.lock_database)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        named = self.admin_site.admin_view(self.named_view)
        reset = self.admin_site.admin_view(self.reset_view)
        return [
            path("named/<path:name>/", named, name="{}_{}_named".format(*info)),
            path("reset/", reset, name="{}_{}_reset".format(*info)),
            *super().get_urls(),
        ]

    def named_view(self, request: HttpRequest, name: str) -> HttpResponse:
        """The page of the schedule named ``name``: the Jobs page links jobs by name."""
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        row = self.get_queryset(request).filter(name=name).first()
        if row is None:
            self.message_user(
                request,
                _("There is no schedule named %(name)s.") % {"name": name},
                messages.WARNING,
            )
            return HttpResponseRedirect(reverse("admin:django_advisory_cron_schedule_changelist"))
        return HttpResponseRedirect(
            reverse("admin:django_advisory_cron_schedule_change", args=[row.pk])
        )

    def reset_view(self, request: HttpRequest) -> HttpResponse:
        """Reset the job named in the POST to its schedule in code: delete its override (with
        ``delete_schedule``), in the admin's log; back to the Jobs page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_delete_permission(request):
            raise PermissionDenied
        back = HttpResponseRedirect(jobs_page(QueryDict(request.POST.get("back", ""))))
        name = request.POST.get("job", "")
        row = self.get_queryset(request).filter(name=name, override=True).first()
        if row is None:
            self.message_user(
                request, _("Job %(job)s has no override to reset.") % {"job": name}, messages.ERROR
            )
            return back
        was = definition_of(row).schedule_text() or "its code's schedule"
        message = f"{name}: reset to its schedule in code (the override said {was})"
        user = request.user.pk
        assert user is not None  # the admin's views let only staff users in
        LogEntry.objects.log_actions(user, [row], DELETION, change_message=message)
        self.delete_model(request, row)
        logger.info("%s (by user %s)", message, request.user.get_username())
        self.message_user(request, f"Job {message}", messages.SUCCESS)
        return back

    @admin.display(description=_("name"), ordering="name")
    def name_display(self, obj: Schedule) -> str:
        return breakable(obj.name)

    @admin.display(description=_("calls"), ordering="job")
    def calls(self, obj: Schedule) -> str:
        """What it runs, its arguments as JSON beneath, and why it cannot run, if it cannot."""
        definition = definition_of(obj)
        shown = format_html("{}", definition.calls)
        for given in (definition.args, definition.kwargs):
            if given:
                shown = format_html(
                    '{}<div class="help"><code>{}</code></div>',
                    shown,
                    json.dumps(given, ensure_ascii=False),
                )
        problems = definition.problems()
        if problems:
            shown = format_html(
                '{}<div class="help schedule-problem"><strong style="color: var(--error-fg)">'
                "{}</strong> {}</div>",
                shown,
                _("cannot run:"),
                problems[0],
            )
        return shown

    @admin.display(description=_("schedule"), ordering="cron")
    def schedule_display(self, obj: Schedule) -> str:
        text = definition_of(obj).schedule_text() or _("as in code")
        if not obj.timezone:
            return format_html("{}", text)
        return format_html('{}<div class="help">{}</div>', text, obj.timezone)

    @admin.display(description=_("kind"), ordering="override")
    def kind(self, obj: Schedule) -> str:
        if obj.override:
            return str(_("overrides a code job"))
        return str(_("runs a command") if obj.command else _("calls a job"))

    @admin.display(description=_("changed"), ordering="changed")
    def changed_display(self, obj: Schedule) -> str:
        if not obj.changed_by:
            return when(obj.changed)
        return format_html(
            '{}<div class="help">{} {}</div>', when(obj.changed), _("by"), obj.changed_by
        )
