"""Template tags for the app's admin pages: the index's health facts (as ``cronstatus``), and
times and job names that fit a laptop's window."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django import template
from django.db import DatabaseError
from django.utils import timezone
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from ..exceptions import LockDatabaseError
from ..ops import heldlocks, status

register = template.Library()


@register.simple_tag(takes_context=True)
def advisory_cron_health(context: dict[str, Any]) -> dict[str, Any] | None:
    """Problems per job and the stale-lock count, for users allowed to see them, or why they
    cannot be read here (``unavailable``)."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.has_perm("django_advisory_cron.view_registeredjob"):
        return None
    try:
        statuses = status.job_statuses()
        stale = None
        if user.has_perm("django_advisory_cron.view_heldlock"):
            stale = heldlocks.held_locks().filter(stale=True).count()
    except LockDatabaseError as error:  # not PostgreSQL: a project developing on SQLite
        return {"unavailable": str(error)}
    except DatabaseError:
        return None
    return {
        "total": len(statuses),
        "problems": [item for item in statuses if item.problems],
        "stale_locks": stale,
    }


@register.filter
def when(value: datetime | None) -> SafeString:
    """A time to the second, as two unbreakable halves (date, time) that wrap into two lines
    in a narrow column: runs of a seconds-apart job read as different times."""
    if value is None:
        return mark_safe("—")
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    # Numbers only, so no escaping: a page of jobs shows a few hundred.
    return mark_safe(
        f'<time class="when" datetime="{local.isoformat()}"><span>{local.year:04d}-'
        f"{local.month:02d}-{local.day:02d}</span> <span>{local:%H:%M:%S}</span></time>"
    )


@register.filter
def breakable(name: str) -> SafeString:
    """A job name that may wrap after its dots and underscores, not in the middle of a word."""
    return mark_safe(re.sub(r"([._])", r"\1<wbr>", str(conditional_escape(name))))
