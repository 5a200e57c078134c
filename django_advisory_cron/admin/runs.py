"""The Job runs page: the run history, read with bounded counts and index probes, so a
page costs the same at a thousand runs or a million."""

from __future__ import annotations

from datetime import datetime, time, timedelta, tzinfo
from typing import Any, Literal

from django.apps import apps
from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.db import DatabaseError
from django.db.models import DurationField, ExpressionWrapper, F, Min, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from ..conf import app_settings
from ..contrib.tenants import SEPARATOR, tenant_of
from ..core.jitter import offset_seconds, step_for
from ..core.statuses import SKIPS
from ..delivery import targets
from ..exceptions import AdvisoryCronError
from ..jobs import catalog, fanout, versions
from ..jobs.catalog import Catalog
from ..models import JobRun, RunStatus
from ..ops import charts
from ..ops.charts import GREY, STATUS_COLOURS, human_duration, human_lateness
from ..templatetags.advisory_cron_admin import breakable, when
from .common import ReadOnlyAdmin, badge
from .schedule_versions import versions_url


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
        names = {job.name for job in page_catalog(request).all()}
        if self.value():
            names.add(str(self.value()))
        return [(name, name) for name in sorted(names)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset if self.value() is None else queryset.filter(job=self.value())


def page_catalog(request: HttpRequest) -> Catalog:
    """The catalog, read once for a page's filters (one statement each time it is read)."""
    found: Catalog | None = getattr(request, "_advisory_cron_catalog", None)
    if found is None:
        found = catalog.current()
        request._advisory_cron_catalog = found  # type: ignore[attr-defined]
    return found


class TenantFilter(admin.SimpleListFilter):
    """A tenant's runs of the per-tenant jobs (``name@schema``, django-tenants).

    Offered only when ``django_tenants`` is installed: the settings say so for nothing, where
    asking the history whether it holds a tenant's run would read all of it on every page of
    every project (a name ending in ``@schema`` is no index's prefix). Its choices are the
    tenants the per-tenant jobs run for, as the Jobs page lists them (the tenant model: one
    statement), not the names found in the history, which would also read all of it.
    ``?tenant=`` still filters on any schema, a tenant dropped since included; it keeps the
    runs of the per-tenant jobs defined now, by their exact names (through the job index)."""

    title = _("tenant")
    parameter_name = "tenant"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        if not apps.is_installed("django_tenants"):
            return []
        schemas = {
            each.tenant
            for job in page_catalog(request).all()
            if job.per_tenant
            for each in fanout.split(job)
            if each.tenant is not None
        }
        if self.value():
            schemas.add(str(self.value()))
        return [(schema, schema) for schema in sorted(schemas)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() is None:
            return queryset
        per_tenant = [job.name for job in page_catalog(request).all() if job.per_tenant]
        return queryset.filter(job__in=[f"{name}{SEPARATOR}{self.value()}" for name in per_tenant])


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
    list_filter = (SkipsFilter, JobFilter, TenantFilter, "status", "started")
    search_fields = ("job", "host", "error", "task_id")
    date_hierarchy = "started"
    list_per_page = 100
    # No full count, no facets: each would read the whole history.
    paginator = BoundedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    fields = (
        "job",
        "schedule_version_display",
        "status",
        "attempts",
        "tick_time",
        "backfill",
        "started_time",
        "lateness_display",
        "finished_time",
        "duration_display",
        "host",
        "pid",
        "task",
    )
    readonly_fields = (
        "schedule_version_display",
        "tick_time",
        "started_time",
        "lateness_display",
        "finished_time",
        "duration_display",
        "task",
        "earlier_attempts_text",
        "error_text",
        "output_text",
    )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*self.fields, "earlier_attempts_text", "error_text", "output_text"]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Filtered to one job (``?job=``), the page starts with that job's run chart."""
        job = request.GET.get("job")
        if job:
            extra_context = {**(extra_context or {}), "run_chart": charts.job_charts([job])[job]}
        response = super().changelist_view(request, extra_context)
        listing = getattr(response, "context_data", None) or {}
        if "cl" in listing:
            listing["cl"].result_list = self._with_versions(list(listing["cl"].result_list))
        return response

    @staticmethod
    def _with_versions(runs: list[JobRun]) -> list[JobRun]:
        """The page's runs, each with the schedule version it ran under, read in one query
        for the page (not per row, and not in the page's count)."""
        under = versions.ran_under(app_settings.lock_database, [(r.job, r.started) for r in runs])
        for run in runs:
            run.schedule_version = under.get((run.job, run.started))  # type: ignore[attr-defined]
        return runs

    def get_queryset(self, request: HttpRequest) -> QuerySet[JobRun]:
        duration = ExpressionWrapper(F("finished") - F("started"), output_field=DurationField())
        queryset: QuerySet[JobRun] = super().get_queryset(request)
        runs = RunQuerySet(self.model, query=queryset.query, using=app_settings.lock_database)
        return targets.with_task_links(runs.annotate(elapsed=duration))

    @admin.display(description=_("schedule version"))
    def schedule_version_display(self, obj: JobRun) -> str:
        """On a run's page: the version of its database schedule it ran under, linked."""
        found = versions.ran_under(app_settings.lock_database, [(obj.job, obj.started)])
        number = found.get((obj.job, obj.started))
        if number is None:
            return "-"
        return format_html('<a href="{}">{}</a>', versions_url(obj.job, number), number)

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, obj: JobRun) -> str:
        """The status, and under it the attempts of a retried run (``on attempt 2``)."""
        shown = badge(STATUS_COLOURS.get(RunStatus(obj.status), GREY), obj.get_status_display())
        note = obj.attempts_note
        return format_html('{}<div class="help">{}</div>', shown, note) if note else shown

    @admin.display(description=_("job"), ordering="job")
    def job_display(self, obj: JobRun) -> str:
        """The job, and under it the version of its database schedule the run ran under: the
        last one recorded at or before its start."""
        number = getattr(obj, "schedule_version", None)
        if number is None:
            return breakable(obj.job)
        return format_html(
            '{}<div class="help"><a href="{}">{}</a></div>',
            breakable(obj.job),
            versions_url(obj.job, number),
            _("schedule version %(number)s") % {"number": number},
        )

    @admin.display(description=_("started / tick"), ordering="started")
    def started_display(self, obj: JobRun) -> str:
        """When it started; for a run with a tick, the tick and how late after it."""
        if obj.lateness is None:
            return when(obj.started)
        return format_html(
            '{}<div class="help">{} {}, {} {}{}</div>',
            when(obj.started),
            _("tick"),
            when(obj.tick),
            human_lateness(obj.lateness),
            _("late"),
            _(", a backfill") if obj.backfill else "",
        )

    @admin.display(description=_("late"))
    def lateness_display(self, obj: JobRun) -> str:
        """How long after its tick it started; "-" without a tick. For a job with a jitter,
        how much of it was the tick's offset (computed from the job's jitter, as every replica
        computes it: not stored; a tenant's run's in the worker's whole steps)."""
        if obj.lateness is None:
            return "-"
        late = human_lateness(obj.lateness)
        try:
            found = catalog.current()
        except (DatabaseError, AdvisoryCronError):
            return late
        name, tenant = obj.job, None
        if name not in found:
            name, tenant = tenant_of(name)  # a tenant's run of a per-tenant job
        if name not in found or (tenant is not None and not found.get(name).per_tenant):
            return late  # a job no longer defined, say
        job = found.get(name)
        shift = offset_seconds(obj.job, obj.tick, job.jitter, step_for(tenant))
        if shift is None:
            return late
        return format_html("{} ({} +{})", late, _("its jitter offset:"), human_lateness(shift))

    # The run's page shows its times to the second, as the list does: the admin's own date
    # format stops at the minute, where a 10-second job's runs would read alike.
    @admin.display(description=_("tick"))
    def tick_time(self, obj: JobRun) -> str:
        return when(obj.tick)

    @admin.display(description=_("started"))
    def started_time(self, obj: JobRun) -> str:
        return when(obj.started)

    @admin.display(description=_("finished"))
    def finished_time(self, obj: JobRun) -> str:
        return when(obj.finished)

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
        """The task result id of a run delivered through a task queue, linked to its page
        when its target keeps one."""
        return targets.task_link(obj.task_id, obj)

    @admin.display(description=_("error"))
    def error_short(self, obj: JobRun) -> str:
        """The last line of the run's own error: a retried attempt's error is not the run's."""
        last_line = (obj.run_error.splitlines() or [""])[-1]
        return breakable(Truncator(last_line).chars(80))

    @admin.display(description=_("output"))
    def output_text(self, obj: JobRun) -> str:
        """What the run captured (``@locked_task(capture=...)``, wrapped commands)."""
        if not obj.output:
            return "—"
        return format_html('<pre style="white-space:pre-wrap;margin:0">{}</pre>', obj.output)

    @admin.display(description=_("error"))
    def error_text(self, obj: JobRun) -> str:
        """The run's own error (its last attempt's), apart from the earlier attempts'."""
        if not obj.run_error:
            return "—"
        return format_html('<pre style="white-space:pre-wrap;margin:0">{}</pre>', obj.run_error)

    @admin.display(description=_("earlier attempts"))
    def earlier_attempts_text(self, obj: JobRun) -> str:
        """Each attempt that failed and was retried, with its error."""
        earlier = "\n".join(obj.earlier_attempts)
        if not earlier:
            return "—"
        return format_html('<pre style="white-space:pre-wrap;margin:0">{}</pre>', earlier)
