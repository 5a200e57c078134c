"""Async views for the async lock test, served by a real ASGI server (``tests/asgi.py``)."""

from django.http import HttpRequest, JsonResponse

from django_advisory_cron import advisory_lock


async def locked(request: HttpRequest) -> JsonResponse:
    """Takes the lock ``asgi-held``, waiting up to ``?wait=`` seconds for it."""
    async with advisory_lock("asgi-held", scope="session", wait=float(request.GET["wait"])) as lock:
        return JsonResponse({"acquired": lock.acquired})


async def ping(request: HttpRequest) -> JsonResponse:
    """Answers at once: it shows whether the event loop is free."""
    return JsonResponse({"pong": True})
