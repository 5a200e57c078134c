"""What several admin pages share: status badges, filters with fixed choices,
and the read-only base of the pages nobody edits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from ..conf import app_settings
from ..db.connections import require_postgresql
from ..exceptions import LockDatabaseError

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

BADGE = (
    '<span style="display:inline-block;padding:1px 6px;border-radius:4px;font-weight:bold;'
    'color:#fff;background:{};">{}</span>'
)


def badge(colour: str, text: Any) -> str:
    return format_html(BADGE, colour, text)


class ChoiceFilter(admin.SimpleListFilter):
    """A filter with fixed choices: the URL value is compared in Python, never sent to SQL."""

    options: dict[str, tuple[StrOrPromise, dict[str, Any]]] = {}

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, str(label)) for value, (label, _lookup) in self.options.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        choice = self.options.get(self.value() or "")
        return queryset if choice is None else queryset.filter(**choice[1])


def refused_here(request: HttpRequest, title: str) -> HttpResponse | None:
    """Back to the admin's index, saying why, where the lock database is not PostgreSQL (a
    project that develops on SQLite): the pages that read its locks, jobs and runs cannot be
    shown there, and the rest of the admin keeps working. ``None`` where they can."""
    try:
        require_postgresql(app_settings.lock_database)
    except LockDatabaseError as error:
        messages.error(request, f"{title}: {error}")
        return HttpResponseRedirect(reverse("admin:index"))
    return None


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Viewing needs the model's view permission; nobody may add, change or delete. Its pages
    read the lock database, so they need PostgreSQL (``refused_here``)."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        refused = refused_here(request, str(self.opts.verbose_name_plural).capitalize())
        return refused or super().changelist_view(request, extra_context)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        refused = refused_here(request, str(self.opts.verbose_name).capitalize())
        return refused or super().changeform_view(request, object_id, form_url, extra_context)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
