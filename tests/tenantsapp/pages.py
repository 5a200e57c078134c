"""The tenants' project's pages, read in its own process (``manage.py shell -c``): the tests'
process runs the plain project's settings, and these need django-tenants' own."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext


def show(*urls: str) -> None:
    """Print each page as a superuser sees it, one JSON line each: its status, its text and
    the statements it sent besides the session's, the user's and django-tenants' own
    ``SET search_path``."""
    user, _made = get_user_model().objects.get_or_create(
        username="ops", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    for url in urls:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        sent = [
            query["sql"]
            for query in captured.captured_queries
            if not any(auth in query["sql"] for auth in ('FROM "django_session"', 'FROM "auth_'))
            and not query["sql"].startswith("SET search_path")
        ]
        page = {"url": url, "status": response.status_code, "text": response.content.decode()}
        print(json.dumps({**page, "statements": sent}))


def operate(url: str, *forms: dict[str, str]) -> None:
    """POST each form to ``url`` as a superuser, one JSON line each: its status and the
    messages the page it leads back to shows (the Jobs page's Pause, Resume, Run now)."""
    from django.contrib.messages import get_messages

    user, _made = get_user_model().objects.get_or_create(
        username="ops", defaults={"is_staff": True, "is_superuser": True}
    )
    for form in forms:
        client = Client()  # a session of its own: only this form's messages
        client.force_login(user)
        response = client.post(url, form)
        said = [(each.level_tag, str(each)) for each in get_messages(response.wsgi_request)]
        print(json.dumps({"form": form, "status": response.status_code, "messages": said}))
