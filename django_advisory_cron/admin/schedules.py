"""The Schedules pages: the schedules kept in the database, the only rows the admin
edits, checked as ``manage.py cronjob add`` checks one."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.models import DELETION, LogEntry
from django.core.exceptions import PermissionDenied
from django.core.management import get_commands
from django.db.models import Q, QuerySet
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    QueryDict,
)
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..conf import app_settings
from ..core.moments import EARLIEST, LATEST
from ..core.once import read_moment
from ..core.schedule import zone_problem
from ..delivery.targets import by_name
from ..jobs import catalog
from ..jobs.definitions import Definition, to_job
from ..jobs.job import Job, registry
from ..jobs.options import OPTIONS, Group, Widget
from ..jobs.versions import changing
from ..models import Schedule
from ..templatetags.advisory_cron_admin import breakable, when
from . import schedule_preview, schedule_versions
from .common import ChoiceFilter
from .jobs import jobs_page

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

logger = logging.getLogger("django_advisory_cron")


#: Where a schedule's problem shows on its form: the field of the first pattern that matches
#: the start of the problem (as
#: [problems][django_advisory_cron.jobs.definitions.Definition.problems] words them); a
#: problem no pattern matches shows above the form.
PROBLEM_FIELDS = [
    (re.compile(option.problems), option.name) for option in OPTIONS if option.problems
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


def as_it_runs(definition: Definition) -> str:
    """What happens around a (valid) schedule's body, and whose choice each is: the
    schedule's own, its job's, or a command's default."""
    job = to_job(definition)

    def whose(field: str, inherited: bool = True) -> str:
        if getattr(definition, field) is not None:
            return "this schedule's"
        if not inherited:
            return "the default"
        return f"job {definition.job}'s" if definition.job else "a command's default"

    retry = job.retry
    said = [f"retries: {0 if retry is None else retry.retries} ({whose('retries')})"]
    if retry is not None:
        target = registry.get(definition.job) if definition.job else None
        inherited = target is not None and target.retry is not None
        said.append(f"retry back-off: {retry.backoff:g} s ({whose('retry_backoff', inherited)})")
    said.append(f"at most once: {'yes' if job.at_most_once else 'no'} ({whose('at_most_once')})")
    captures = "yes" if job.capture is not None else "no"
    said.append(f"captured output: {captures} ({whose('capture')})")
    return "; ".join(said)


class InheritSelect(forms.NullBooleanSelect):
    """Yes, no, or empty: as the job the schedule calls does."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.choices = [("unknown", _("As its job does")), ("true", _("Yes")), ("false", _("No"))]


#: The form's widget of each kind an option names.
WIDGETS: dict[Widget, type[forms.Widget] | forms.Widget] = {
    "area": forms.Textarea(attrs={"rows": 2, "cols": 60}),
    "inherit": InheritSelect,
}
#: The form's headings, by the group an option names.
TITLES: dict[Group, StrOrPromise | None] = {
    "": None,
    "calls": _("What it calls"),
    "when": _("When"),
    "options": _("Options"),
    "around": _("Around the body"),
}
#: Each heading's title and its options, in the options' order.
GROUPS = {
    group: (title, tuple(option.name for option in OPTIONS if option.group == group))
    for group, title in TITLES.items()
}


#: What a schedule's page shows after a group's fields: its next ticks (on the form too, for
#: what is typed), and what applies around its body as it was saved.
SHOWN_AFTER = {"when": ("next_ticks_display",), "around": ("around_display",)}


def choices(names: Iterable[str], current: str) -> list[tuple[str, str]]:
    """A blank choice, then ``names`` by name. ``current`` (the row's saved value) is offered
    too: editing a schedule whose job left the code shows that job, and the check says why it
    cannot run, rather than a blank field."""
    return [("", "---------"), *((name, name) for name in sorted({*names, current} - {""}))]


class ScheduleForm(forms.ModelForm):  # type: ignore[type-arg]
    """A schedule as typed in the admin, checked as ``manage.py cronjob add`` checks one: every
    problem of its [Definition][django_advisory_cron.jobs.definitions.Definition] is a form
    error, on its field. It calls only a registered job or a management command the settings
    allow, chosen from a list: never a dotted path. Its name cannot change once it exists."""

    job = forms.ChoiceField(
        label=_("Job"),
        required=False,
        help_text=_("The registered job it calls, with the arguments below."),
    )
    command = forms.ChoiceField(
        label=_("Management command"),
        required=False,
        help_text=_(
            "Or the management command it calls: one of the two. Only those "
            "ADVISORY_CRON['SCHEDULE_COMMANDS'] allows."
        ),
        error_messages={
            "invalid_choice": _(
                "%(value)s is not a command a schedule may call: those are the installed "
                "commands ADVISORY_CRON['SCHEDULE_COMMANDS'] names"
            )
        },
    )
    change_note = forms.CharField(
        label=_("Note"),
        required=False,
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text=_("Why, kept with the version this change makes (see its versions below)."),
    )

    class Meta:
        model = Schedule
        fields = tuple(name for _group, names in GROUPS.values() for name in names)
        widgets = {option.name: WIDGETS[option.widget] for option in OPTIONS if option.widget}
        help_texts = {
            option.name: option.form_help for option in OPTIONS if option.form_help is not None
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        saved = self.instance
        if saved.pk and "name" in self.fields:  # its lock, ticks and history go by it
            self.fields["name"].disabled = True
            self.fields["name"].help_text = _(
                "The name its runs, lock and ticks go by cannot change: to rename, add the "
                "schedule under its new name and remove this one."
            )
        if saved.at is not None:  # shown in its own zone, as it is typed
            named = saved.timezone if not zone_problem(saved.timezone) else ""
            zone = ZoneInfo(named or settings.TIME_ZONE or "UTC")
            self.initial["at"] = saved.at.astimezone(zone).replace(tzinfo=None)
        jobs = (job.name for job in registry.all())
        self.fields["job"].choices = choices(jobs, saved.job)  # type: ignore[attr-defined]
        allowed = app_settings.SCHEDULE_COMMANDS.intersection(get_commands())
        self.fields["command"].choices = choices(allowed, saved.command)  # type: ignore[attr-defined]

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
        self._read_at(cleaned)
        definition = Definition.from_values(cleaned)
        for problem in definition.problems(known=self._others(definition.name)):
            self.add_error(problem_field(problem), problem)
        return cleaned

    def _read_at(self, cleaned: dict[str, Any]) -> None:
        """A one-off's moment is shown and typed as a local time of the schedule's own zone,
        as ``cronjob add --at`` reads it (Django reads it in TIME_ZONE: undone here). A moment
        other than the saved one that has passed is refused, as there: it would never run."""
        at, zone = cleaned.get("at"), cleaned.get("timezone") or None
        if at is None:
            return
        try:
            cleaned["at"] = read_moment(timezone.localtime(at).replace(tzinfo=None), zone)
        except ValueError:
            return  # a bad zone is the definition's to say
        if cleaned["at"] != self.instance.at and cleaned["at"] <= timezone.now():
            self.add_error(
                "at",
                f"the moment {cleaned['at'].isoformat(sep=' ')} has passed; give a moment to "
                "come (to run it now: Run now on the Jobs page)",
            )

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


class KindFilter(ChoiceFilter):
    title = _("kind")
    parameter_name = "kind"
    options = {
        "job": (_("calls a job"), {"override": False, "command": ""}),
        "command": (_("runs a command"), {"override": False, "job": ""}),
        "override": (_("overrides a code job"), {"override": True}),
    }


#: Rows whose times Python can hold: SQL can write others ('infinity', the year 200000), which
#: the driver cannot read, so a page that reads them whole would fail for every row.
READABLE = (
    (Q(starts__isnull=True) | Q(starts__range=(EARLIEST, LATEST)))
    & (Q(ends__isnull=True) | Q(ends__range=(EARLIEST, LATEST)))
    & Q(created__range=(EARLIEST, LATEST), changed__range=(EARLIEST, LATEST))
)


class ScheduleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Schedules kept in the database: adding, changing and deleting them need Django's
    ``add_schedule``, ``change_schedule`` and ``delete_schedule``; each change is in the
    admin's log with its user, who is also the row's ``changed_by``. They are read from and
    written to the lock database, where the workers read them."""

    class Media:
        css = {"all": ["django_advisory_cron/admin.css"]}
        js = ["django_advisory_cron/schedule_preview.js"]

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
    readonly_fields = ("around_display", "next_ticks_display", "created", "changed", "changed_by")
    list_per_page = 100
    fieldsets: ClassVar[Any] = [
        (title, {"fields": (*names, *SHOWN_AFTER.get(group, ()))})
        for group, (title, names) in GROUPS.items()
    ] + [
        (_("Why"), {"fields": ("change_note",)}),
        (_("Changes"), {"fields": ("created", "changed", "changed_by")}),
    ]

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        """What applies around its body and who changed it when, once it exists (its next
        ticks show on the add form too, for what is typed)."""
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None:
            return fieldsets
        return [
            (name, {**options, "fields": [f for f in options["fields"] if f != "around_display"]})
            for name, options in fieldsets[:-1]
        ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        """The rows the page can read (``READABLE``); ``changelist_view`` names the others."""
        return super().get_queryset(request).using(app_settings.lock_database).filter(READABLE)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The list, with the names of the rows it cannot show and how to mend them."""
        unreadable = sorted(
            Schedule.objects.using(app_settings.lock_database)
            .exclude(READABLE)
            .values_list("name", flat=True)
        )
        if unreadable and request.method == "GET":
            self.message_user(
                request,
                ngettext(
                    "%(count)d schedule holds times outside the years 1 to 9999, which this page "
                    "cannot show: %(names)s. It cannot run; give it times within those years "
                    "with manage.py cronjob edit NAME --starts WHEN --ends WHEN, or remove it "
                    "with manage.py cronjob remove NAME.",
                    "%(count)d schedules hold times outside the years 1 to 9999, which this page "
                    "cannot show: %(names)s. They cannot run; give them times within those years "
                    "with manage.py cronjob edit NAME --starts WHEN --ends WHEN, or remove them "
                    "with manage.py cronjob remove NAME.",
                    len(unreadable),
                )
                % {"count": len(unreadable), "names": ", ".join(unreadable)},
                messages.WARNING,
            )
        return super().changelist_view(request, extra_context)

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        """Saved in the user's name, with the form's note: its version says both."""
        obj.changed_by = request.user.get_username()[:150]
        with changing(app_settings.lock_database, obj.changed_by, form.cleaned_data["change_note"]):
            obj.save(using=app_settings.lock_database)

    def delete_model(self, request: HttpRequest, obj: Schedule, note: str = "") -> None:
        with changing(app_settings.lock_database, request.user.get_username(), note):
            obj.delete(using=app_settings.lock_database)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        with changing(app_settings.lock_database, request.user.get_username()):
            queryset.delete()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The form, and under it the schedule's versions."""
        row = (
            self.get_queryset(request).filter(pk=object_id).first() if object_id.isdigit() else None
        )
        if row is not None:
            extra_context = {
                **(extra_context or {}),
                **schedule_versions.listed(request, self, row.name),
            }
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        named = self.admin_site.admin_view(self.named_view)
        reset = self.admin_site.admin_view(self.reset_view)
        preview = self.admin_site.admin_view(self.preview_view)
        kept = self.admin_site.admin_view(self.versions_view)
        revert = self.admin_site.admin_view(self.revert_view)
        return [
            path("versions/<path:name>/", kept, name="{}_{}_versions".format(*info)),
            path("revert/<int:number>/<path:name>/", revert, name="{}_{}_revert".format(*info)),
            path("named/<path:name>/", named, name="{}_{}_named".format(*info)),
            path("reset/", reset, name="{}_{}_reset".format(*info)),
            path("preview/", preview, name="{}_{}_preview".format(*info)),
            *super().get_urls(),
        ]

    def versions_view(self, request: HttpRequest, name: str) -> HttpResponse:
        return schedule_versions.versions_view(request, self, name)

    def revert_view(self, request: HttpRequest, number: int, name: str) -> HttpResponse:
        return schedule_versions.revert_view(request, self, name, number)

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """The next ticks of what the form holds, for those who may add or change one."""
        if not (self.has_add_permission(request) or self.has_change_permission(request)):
            raise PermissionDenied
        return schedule_preview.preview(request)

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
        self.delete_model(request, row, "reset to its schedule in code")
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

    @admin.display(description=_("as it runs"))
    def around_display(self, obj: Schedule) -> str:
        """What happens around its body as saved, whose choice each is; nothing for an
        override (its job's, in code) or a schedule that cannot run."""
        definition = definition_of(obj)
        if definition.override or definition.problems():
            return "-"
        named = by_name(definition.deliver)
        if named:
            return str(_("as the %(task)s says, in %(workers)s")) % {
                "task": named.task,
                "workers": named.workers,
            }
        return as_it_runs(definition)

    @admin.display(description=_("next ticks"))
    def next_ticks_display(self, obj: Schedule) -> str:
        """Its next ticks as saved; on the form, those of what is typed (see
        [schedule_preview][django_advisory_cron.admin.schedule_preview])."""
        url = reverse("admin:django_advisory_cron_schedule_preview")
        return schedule_preview.box(
            url, schedule_preview.saved_ticks(obj, definition_of(obj)) if obj.pk else ""
        )

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
