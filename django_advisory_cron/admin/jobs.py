"""The Jobs page: every job the catalog knows, its state and run chart, and the
Pause / Resume / Run now buttons."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.views.main import PAGE_VAR, SEARCH_VAR
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    QueryDict,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

from ..conf import app_settings
from ..db.execute import database_now
from ..jobs import catalog, fanout
from ..jobs.job import Job, registry
from ..models import JobState
from ..ops import charts, control, heldlocks, status
from ..ops.charts import human_duration
from ..worker.fleet import live_workers
from .common import ReadOnlyAdmin, refused_here
from .schedule_versions import versions_url

logger = logging.getLogger("django_advisory_cron")


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


class RegisteredJobAdmin(ReadOnlyAdmin):
    """The "Jobs" page: registered jobs come from code, their state from the database.

    With the ``operate_job`` permission each row has Pause / Resume / Run now buttons: POST
    (with Django's CSRF check) to one view, recorded in the admin's log (``LogEntry``). A
    per-tenant job's rows are its tenants' (``name@schema``), each operated on its own.
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
        jobs = catalog.current(alias).jobs
        # A tenant's row (name@schema) is that tenant's job, as `cronjob ... --tenant` finds it.
        job = jobs.get(name) or fanout.tenant_job(jobs, name)
        if operation not in self.OPERATIONS or job is None:
            self.message_user(
                request, _("There is no job named %(job)s.") % {"job": name}, messages.ERROR
            )
            return back
        if job.per_tenant:  # its ticks run as its tenants' jobs: those are paused and run
            self.message_user(
                request,
                _(
                    "Job %(job)s runs per tenant: pause, resume or run it now on one tenant's "
                    "row (%(job)s@schema)."
                )
                % {"job": name},
                messages.ERROR,
            )
            return back
        user = request.user.get_username()
        level = messages.SUCCESS
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
            held_by = heldlocks.holder(name, alias)
            control.request_run(name, by=user)
            message = f"{name}: run requested; a cronworker starts it within about a second"
            if held_by:  # the worker's try would find it taken: say so now, not "starts it"
                level = messages.WARNING
                message = (
                    f"{name}: run requested, but its lock is held now by {held_by}: unless it "
                    "is released within about a second, the run is recorded as skipped "
                    "(its row on the Job runs page says by whom)"
                )
        state = JobState.objects.using(alias).get(job=name)
        self.log_change(request, state, message)
        logger.info("%s (by user %s)", message, user)
        # "Job ..." first: the admin capitalises a message's first letter, not a job's name.
        self.message_user(request, f"Job {message}", level)
        return back

    @staticmethod
    def _may(request: HttpRequest) -> dict[str, bool]:
        """What the user may do with schedules, asked once for a page of jobs."""
        user, app = request.user, "django_advisory_cron"
        return {
            "see": user.has_perm(f"{app}.view_schedule") or user.has_perm(f"{app}.change_schedule"),
            "reset": user.has_perm(f"{app}.delete_schedule"),
            "override": user.has_perm(f"{app}.add_schedule"),
        }

    @staticmethod
    def _origin(may: dict[str, bool], job: Job[..., Any]) -> dict[str, Any]:
        """Where ``job`` is defined, what an override changes of it, and the links to its
        schedule and its versions the user's permissions (``may``) allow: plain values for the
        template."""
        # A code or settings job read with an override has the time it was edited.
        has_override = job.source != "database" and job.edited is not None
        linked = may["see"] and (has_override or job.source == "database")
        origin: dict[str, Any] = {
            "origin": ORIGINS[job.source],
            "override": override_text(job) if has_override else "",
            "schedule_url": reverse("admin:django_advisory_cron_schedule_named", args=[job.name])
            if linked
            else "",
            "versions_url": versions_url(job.name) if linked else "",
            "override_url": "",
            "reset": has_override and may["reset"],
        }
        if not has_override and job.source != "database" and may["override"]:
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
        refused = refused_here(request, str(self.opts.verbose_name_plural).capitalize())
        if refused:
            return refused
        runs_url = reverse("admin:django_advisory_cron_jobrun_changelist")
        locks_url = reverse("admin:django_advisory_cron_heldlock_changelist")
        statuses, workers = status.statuses_and_workers()
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
        may = self._may(request)
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
                "at_most_once": item.job.at_most_once,
                "description": item.job.description,
                "chart": strips[item.name],
                "paused": item.paused,
                "run_requested": item.run_requested,
                "enabled": item.job.enabled,
                **self._origin(may, item.job),
            }
            for item in page
        ]
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
