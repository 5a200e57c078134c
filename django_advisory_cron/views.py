"""The ``health/`` and ``metrics/`` views for load balancers, probes and Prometheus.

Who may read them is ``ENDPOINT_ACCESS``:

- ``"staff"`` (default): a logged-in, active staff user (Django's session); anyone else
  gets 403. Safe by default, but probes and scrapers have no session.
- ``"token"``: the request carries ``Authorization: Bearer <ENDPOINT_TOKEN>`` (what
  Prometheus' ``authorization`` and a Kubernetes probe's ``httpHeaders`` send); else 401.
- ``"open"``: anyone who reaches the URL. The documents name every job, its schedule and the
  hosts that ran it: expose them only on a network that only your probes reach.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from .conf import app_settings
from .status import PROBLEMS, health_document

logger = logging.getLogger("django_advisory_cron")

View = Callable[[HttpRequest], HttpResponse]


def refusal(request: HttpRequest) -> HttpResponse | None:
    """The response that refuses ``request`` under ``ENDPOINT_ACCESS``, or ``None``."""
    access = app_settings.ENDPOINT_ACCESS
    if access == "open":
        return None
    if access == "token":
        token = app_settings.ENDPOINT_TOKEN or ""
        scheme, _space, given = request.headers.get("Authorization", "").partition(" ")
        if token and scheme.lower() == "bearer" and hmac.compare_digest(given, token):
            return None
        response = HttpResponse(
            "401 Unauthorized: send the header 'Authorization: Bearer <ENDPOINT_TOKEN>'.\n",
            status=401,
            content_type="text/plain",
        )
        response["WWW-Authenticate"] = 'Bearer realm="advisory-cron"'
        return response
    user = getattr(request, "user", None)
    if user is not None and user.is_active and user.is_staff:
        return None
    return HttpResponse(
        "403 Forbidden: log in as a staff user, or set ADVISORY_CRON['ENDPOINT_ACCESS'].\n",
        status=403,
        content_type="text/plain",
    )


def guarded(view: View) -> View:
    """``view`` for GET and HEAD only, never cached, behind ``ENDPOINT_ACCESS``."""

    @require_safe
    @never_cache
    def wrapper(request: HttpRequest) -> HttpResponse:
        return refusal(request) or view(request)

    wrapper.__doc__, wrapper.__name__ = view.__doc__, view.__name__
    return wrapper


@guarded
def health(request: HttpRequest) -> HttpResponse:
    """The ``cronstatus --json`` document: 200 when healthy, 503 when a job has a problem
    (``?ignore=failing,stuck`` leaves those problems out), fewer workers are alive than
    ``EXPECT_WORKERS``, or the database is unreachable."""
    ignore = tuple(name for name in request.GET.get("ignore", "").split(",") if name)
    unknown = sorted(set(ignore) - set(PROBLEMS))
    if unknown:
        return JsonResponse(
            {"error": f"unknown problem {', '.join(unknown)}; use {', '.join(PROBLEMS)}"},
            status=400,
        )
    try:
        report: dict[str, Any] = health_document(ignore)
    except DatabaseError as error:
        logger.warning("health view: the lock database cannot be reached: %s", error)
        return JsonResponse(
            {"healthy": False, "error": "the lock database cannot be reached"}, status=503
        )
    return JsonResponse(report, status=200 if report["healthy"] else 503)


@guarded
def metrics(request: HttpRequest) -> HttpResponse:
    """The run history's metrics in Prometheus' text format (needs ``prometheus_client``)."""
    try:
        from . import metrics as exporter
    except ImportError:
        return HttpResponse(
            "501 Not Implemented: install prometheus_client "
            "(pip install 'django-advisory-cron[prometheus]').\n",
            status=501,
            content_type="text/plain",
        )
    from prometheus_client import CONTENT_TYPE_LATEST

    return HttpResponse(exporter.exposition(), content_type=CONTENT_TYPE_LATEST)
