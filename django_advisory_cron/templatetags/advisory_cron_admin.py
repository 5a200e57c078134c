"""Template tags for the app's admin index: the same health facts as ``cronstatus``."""

from __future__ import annotations

from typing import Any

from django import template
from django.db import DatabaseError

from ..ops import heldlocks, status

register = template.Library()


@register.simple_tag(takes_context=True)
def advisory_cron_health(context: dict[str, Any]) -> dict[str, Any] | None:
    """Problems per job and the stale-lock count, for users allowed to see them."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.has_perm("django_advisory_cron.view_registeredjob"):
        return None
    try:
        statuses = status.job_statuses()
        stale = None
        if user.has_perm("django_advisory_cron.view_heldlock"):
            stale = heldlocks.held_locks().filter(stale=True).count()
    except DatabaseError:
        return None
    return {
        "total": len(statuses),
        "problems": [item for item in statuses if item.problems],
        "stale_locks": stale,
    }
