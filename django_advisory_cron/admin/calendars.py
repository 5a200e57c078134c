"""Calendar dates: the days operators add to a business calendar (a source's name, such as
``business:FR`` or ``dates:plant``), with Django's model permissions. A job whose
``calendar=`` names that source skips them as it skips the package's holidays (or, with
``keep:``, runs on them); every replica reads them at each tick."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from ..core import calendars
from ..models import CalendarDate


class CalendarDateForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = CalendarDate
        fields = ("calendar", "day", "reason")
        help_texts = {
            "calendar": _(
                "One source of a calendar, as a job's calendar= names it: holidays:US, "
                "business:FR, market:NYSE, weekends or dates:NAME."
            ),
            "day": _("The day, in the jobs' own time zones."),
            "reason": _(
                "What the next ticks and the history say of it (empty: added by an operator)."
            ),
        }

    def clean_calendar(self) -> str:
        """One source, spelled as a job's calendar spells it (no rule, no ``+``)."""
        text = self.cleaned_data["calendar"]
        try:
            parsed = calendars.parse(text)
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None
        if parsed.rule != "skip" or len(parsed.sources) != 1:
            raise forms.ValidationError(
                _("Name one source (such as business:FR or dates:plant), without a rule or +.")
            )
        return parsed.sources[0].name


class CalendarDateAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = CalendarDateForm
    list_display = ("day", "calendar", "reason")
    list_filter = ("calendar",)
    search_fields = ("calendar", "reason")
    date_hierarchy = "day"
    ordering = ("-day",)
