"""What several admin pages share: status badges, filters with fixed choices,
and the read-only base of the pages nobody edits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

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


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Viewing needs the model's view permission; nobody may add, change or delete."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
