"""Staff users of the admin tests, logged in on a test client with some of the app's
permissions."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission
from django.test import Client

#: What a user who reads the history and the Jobs page may do.
VIEWING = ["view_jobrun", "view_registeredjob"]


def logged_in(user_model: Any, username: str, codenames: list[str]) -> Client:
    """A client logged in as a new staff user ``username`` with the app's ``codenames``."""
    user = user_model.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="django_advisory_cron", codename__in=codenames
        )
    )
    client = Client()
    client.force_login(user)
    return client
