"""A schedule's versions in the admin: the list with what each changed, and going back to one
through a confirmation page (a POST, with ``change_schedule``). The list is shown for any name
that has versions: a removed schedule's, a reset override's."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from ..conf import app_settings
from ..core.schedule_diff import diff, empty, shown
from ..jobs.versions import Version, VersionRefused, revert, version, versions

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

logger = logging.getLogger("django_advisory_cron")


def versions_url(name: str, number: int | None = None) -> str:
    """The versions page of ``name`` (at version ``number``'s row)."""
    url = reverse("admin:django_advisory_cron_schedule_versions", args=[name])
    return f"{url}#version-{number}" if number else url


def changes(kept: Version) -> list[tuple[str, str, str]]:
    """What a version changed, a (field, old, new) row each; for an addition, the fields it
    was given (``old`` empty), its name aside."""
    if kept.before is None and kept.state is not None:
        given = sorted(kept.state.items())
        return [
            (field, "", shown(value))
            for field, value in given
            if field != "name" and not empty(value)
        ]
    return [(c.field, shown(c.old), shown(c.new)) for c in kept.changes]


def rows(kept: list[Version]) -> list[dict[str, Any]]:
    """The versions as the page shows them."""
    return [
        {
            "version": kept_version,
            "changes": changes(kept_version),
            "added": kept_version.before is None and kept_version.state is not None,
            "removed": kept_version.state is None,
            "revert_url": reverse(
                "admin:django_advisory_cron_schedule_revert",
                args=[kept_version.number, kept_version.name],
            ),
        }
        for kept_version in kept
    ]


def listed(request: HttpRequest, admin: ModelAdmin[Any], name: str) -> dict[str, Any]:
    """What the versions list needs, for the versions page and a schedule's own page."""
    kept = versions(app_settings.lock_database, name)
    return {
        "versions_name": name,
        "versions": rows(kept),
        "can_revert": admin.has_change_permission(request),
        "versions_url": versions_url(name),
    }


def versions_view(request: HttpRequest, admin: ModelAdmin[Any], name: str) -> HttpResponse:
    """Every version of ``name``, newest first."""
    if not admin.has_view_or_change_permission(request):
        raise PermissionDenied
    context = {
        **admin.admin_site.each_context(request),
        "title": _("Versions of %(name)s") % {"name": name},
        "opts": admin.opts,
        **listed(request, admin, name),
    }
    return TemplateResponse(request, "admin/django_advisory_cron/schedule/versions.html", context)


class RevertForm(forms.Form):
    note = forms.CharField(
        label=_("Note"),
        required=False,
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text=_("Why, kept with the version the revert makes."),
    )


def revert_view(
    request: HttpRequest, admin: ModelAdmin[Any], name: str, number: int
) -> HttpResponse:
    """GET: what going back to version ``number`` changes, and a button; POST: go back."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    if not admin.has_change_permission(request):
        raise PermissionDenied
    alias = app_settings.lock_database
    back = HttpResponseRedirect(versions_url(name))
    try:
        target = version(alias, name, number)
    except VersionRefused as error:
        admin.message_user(request, str(error), messages.ERROR)
        return back
    form = RevertForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        user = request.user.get_username()
        try:
            said = revert(alias, name, number, user, form.cleaned_data["note"])
        except VersionRefused as error:
            admin.message_user(request, f"Schedule {name}: {error}", messages.ERROR)
            return back
        logger.info("%s (by user %s)", said, user)
        admin.message_user(request, f"Schedule {said}", messages.SUCCESS)
        return back
    current = versions(alias, name)[0]
    context = {
        **admin.admin_site.each_context(request),
        "title": _("Revert %(name)s to version %(number)s?") % {"name": name, "number": number},
        "opts": admin.opts,
        "target": target,
        "current": current,
        "changes": [
            (c.field, shown(c.old), shown(c.new)) for c in diff(current.state, target.state)
        ],
        "removes": target.state is None,
        "form": form,
        "versions_url": versions_url(name),
    }
    return TemplateResponse(
        request, "admin/django_advisory_cron/schedule/revert_confirmation.html", context
    )
