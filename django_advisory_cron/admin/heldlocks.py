"""The Held locks page: the server's advisory locks, with a guarded terminate action.

The list costs one query per page: rows, total count (a window function) and every computed
column come back together, so 5,000 locks cost one scan of the server's lock table rather than
one per count, page and row. The sessions' query text is shown and searched only with its own
permission: it may hold other applications' secrets.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ALL_VAR, PAGE_VAR, ChangeList
from django.core.exceptions import PermissionDenied
from django.core.paginator import InvalidPage, Page, Paginator
from django.db.models import Count, QuerySet, Window
from django.db.models.constants import LOOKUP_SEP
from django.db.models.expressions import Combinable
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..models import HeldLock
from ..ops import heldlocks
from ..ops.charts import AMBER, GREEN, RED, human_duration
from .common import ChoiceFilter, ReadOnlyAdmin, badge

logger = logging.getLogger("django_advisory_cron")


class OursFilter(ChoiceFilter):
    title = _("owner")
    parameter_name = "ours"
    options = {
        "yes": (_("this app's locks"), {"ours": True}),
        "no": (_("other advisory locks"), {"ours": False}),
    }


class GrantedFilter(ChoiceFilter):
    title = _("granted")
    parameter_name = "granted"
    options = {
        "held": (_("held"), {"granted": True}),
        "waiting": (_("waiting"), {"granted": False}),
    }


class StaleFilter(ChoiceFilter):
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


class HeldLockAdmin(ReadOnlyAdmin):
    class Media:
        css = {"all": ["django_advisory_cron/admin.css"]}

    #: Who holds the lock first, in columns that fit a 1024 px window: its keys and mode are
    #: on the lock's own page.
    list_display = (
        "job_display",
        "pid",
        "status_display",
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
        if getattr(obj, "probe", False):
            return str(_("pooling probe (kept by a pooled server connection, by design)"))
        if getattr(obj, "ours", False):
            return str(_("unknown job (not registered here)"))
        return "—"

    @admin.display(description=_("job"), ordering="job")
    def job_display(self, obj: HeldLock) -> str:
        """The job, and under it the run holding the lock (its host and pid), if recorded."""
        name = self.job_name(obj)
        host = getattr(obj, "run_host", None)
        if not host:
            return name
        return format_html(
            '{}<div class="help">{} {}</div>', name, _("run on"), self.run_display(obj)
        )

    @admin.display(description=_("status / held for"), ordering="held_for")
    def status_display(self, obj: HeldLock) -> str:
        """Held or waiting, stale or not, and for how long, in one cell."""
        return format_html(
            '{} {}<div class="help">{}</div>',
            self.granted_badge(obj),
            self.stale_badge(obj),
            self.held_for_display(obj),
        )

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
