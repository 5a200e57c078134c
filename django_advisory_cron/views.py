"""The ``health/`` and ``metrics/`` views for load balancers, probes and Prometheus.

Who may read them is ``ENDPOINT_ACCESS``:

- ``"staff"`` (default): a logged-in, active staff user (Django's session) with the
  permissions the admin's Jobs page and run history need (``view_registeredjob``, and
  ``view_jobrun`` or ``change_jobrun``), since the documents show the same facts; anyone
  else gets 403. Safe by default, but probes and scrapers have no session: they use
  ``"token"``.
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

from .conf import APP_LABEL, app_settings
from .ops.status import PROBLEMS, health_document

logger = logging.getLogger("django_advisory_cron")

View = Callable[[HttpRequest], HttpResponse]


def _header_bytes(value: str) -> bytes:
    """The bytes the client sent for a header ``value``: WSGI and ASGI servers read them as
    Latin-1. (``compare_digest`` refuses ``str`` with non-ASCII characters: compare bytes.)"""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:  # not from a server (Django's test client passes any str)
        return value.encode("utf-8", "surrogatepass")


def bearer_token(authorization: str) -> str | None:
    """The credentials of an ``Authorization: Bearer <token>`` value (scheme in any case, one
    or more spaces after it), else ``None``."""
    scheme, _space, credentials = authorization.strip(" ").partition(" ")
    credentials = credentials.lstrip(" ")
    if scheme.lower() != "bearer" or not credentials or " " in credentials:
        return None
    return credentials


#: What a staff user needs to read the views under ``ENDPOINT_ACCESS = "staff"``: the admin's
#: rule for each page showing the same facts (Django's ``ModelAdmin.has_view_permission``:
#: view or change). The Jobs page shows pauses, lock holders and live workers; the run history
#: shows each run's host and pid.
STAFF_PERMISSIONS = (
    ("view_registeredjob",),  # the Jobs page
    ("view_jobrun", "change_jobrun"),  # the run history
)


def may_read(user: Any) -> bool:
    """Whether ``user`` may read the documents under ``ENDPOINT_ACCESS = "staff"``."""
    if user is None or not user.is_active or not user.is_staff:
        return False
    return all(
        any(user.has_perm(f"{APP_LABEL}.{codename}") for codename in either)
        for either in STAFF_PERMISSIONS
    )


def refusal(request: HttpRequest) -> HttpResponse | None:
    """The response that refuses ``request`` under ``ENDPOINT_ACCESS``, or ``None``.

    Whatever ``Authorization`` header a client sends, the answer is 401 or 403, never an error.
    """
    access = app_settings.ENDPOINT_ACCESS
    if access == "open":
        return None
    if access == "token":
        token = app_settings.ENDPOINT_TOKEN or ""
        given = bearer_token(request.headers.get("Authorization", ""))
        if (
            token
            and given is not None
            and hmac.compare_digest(_header_bytes(given), token.encode("utf-8", "surrogatepass"))
        ):
            return None
        response = HttpResponse(
            "401 Unauthorized: send the header 'Authorization: Bearer <ENDPOINT_TOKEN>'.\n",
            status=401,
            content_type="text/plain",
        )
        response["WWW-Authenticate"] = 'Bearer realm="advisory-cron"'
        return response
    if may_read(getattr(request, "user", None)):
        return None
    return HttpResponse(
        "403 Forbidden: log in as an active staff user with the permissions to view jobs "
        f"({APP_LABEL}.view_registeredjob) and job runs ({APP_LABEL}.view_jobrun), "
        "the admin pages that show the same facts; a probe or scraper without a login uses "
        "ADVISORY_CRON['ENDPOINT_ACCESS'] = 'token'.\n",
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
        from .ops import metrics as exporter
    except ImportError:
        return HttpResponse(
            "501 Not Implemented: install prometheus_client "
            "(pip install 'django-advisory-cron[prometheus]').\n",
            status=501,
            content_type="text/plain",
        )
    from prometheus_client import CONTENT_TYPE_LATEST

    return HttpResponse(exporter.exposition(), content_type=CONTENT_TYPE_LATEST)
