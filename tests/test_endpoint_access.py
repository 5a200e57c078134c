"""Who may read ``health/`` and ``metrics/``: any Authorization header a client can send gets
200, 401 or 403 (never a 500), and under ``"staff"`` a staff user needs the permissions of the
admin pages that show the same facts (the Jobs page and the run history)."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.test.utils import override_settings

from django_advisory_cron import locked_task
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.ops import control

HEALTH, METRICS = "/cron/health/", "/cron/metrics/"
RUNS = "/admin/django_advisory_cron/jobrun/"
JOBS = "/admin/django_advisory_cron/registeredjob/"
TOKEN = "s3cret-token-0123456789"


def access(mode: str, **extra: Any) -> Any:
    return override_settings(ADVISORY_CRON={"ENDPOINT_ACCESS": mode, **extra})


@pytest.fixture
def paused_job(db_url: str, fresh_registry: None) -> Job[Any, Any]:
    @locked_task(name="access.nightly", schedule="0 2 * * *")
    def nightly() -> None:
        """Runs at night."""

    nightly.run()
    control.pause("access.nightly", by="alice", reason="supplier outage")
    return nightly


# -- item 6: malformed and non-ASCII bearer tokens -----------------------------------------------

REFUSED = [
    "Bearer éé",
    "Bearer €uro-token-0123456789",
    f"Bearer {TOKEN}é",
    "Bearer",
    "Bearer ",
    "Bearer    ",
    pytest.param("Bearer " + "x" * 100_000, id="Bearer x*100000"),
    "Basic dXNlcjpwYXNz",
    f"Token {TOKEN}",
    f"Bearer\t{TOKEN}",
    f"Bearer{TOKEN}",
    f"Bearer {TOKEN} {TOKEN}",
    TOKEN,
    "",
    " ",
]
ACCEPTED = [
    f"Bearer {TOKEN}",
    f"bearer {TOKEN}",
    f"BEARER {TOKEN}",
    f"Bearer   {TOKEN}",  # RFC 9110: one or more spaces after the scheme
    f"Bearer {TOKEN}  ",
]


@pytest.mark.parametrize("url", [HEALTH, METRICS])
@pytest.mark.parametrize("header", REFUSED)
def test_a_bad_authorization_header_is_401_never_500(
    paused_job: Job[Any, Any], url: str, header: str
) -> None:
    client = Client(raise_request_exception=False)
    with access("token", ENDPOINT_TOKEN=TOKEN):
        response = client.get(url, headers={"Authorization": header})
    print(repr(header[:40]), response.status_code)
    assert response.status_code == 401, response.content[:200]
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ACCEPTED)
def test_the_token_is_accepted_however_the_header_is_spelled(
    paused_job: Job[Any, Any], header: str
) -> None:
    client = Client(raise_request_exception=False)
    with access("token", ENDPOINT_TOKEN=TOKEN):
        for url in (HEALTH, METRICS):
            assert client.get(url, headers={"Authorization": header}).status_code == 200


@pytest.fixture(scope="module")
def live(django_db_setup: None, django_db_blocker: Any) -> Iterator[Any]:
    """A real HTTP server running the project (its static handler needs a ``STATIC_URL``)."""
    from pytest_django.live_server_helper import LiveServer

    with override_settings(STATIC_URL="/static/"), django_db_blocker.unblock():
        server = LiveServer("localhost")
        yield server
        server.stop()


def raw_get(base: str, path: str, authorization: bytes) -> int:
    """GET ``path`` over a real socket with the header's bytes exactly as given."""
    parts = urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname or "localhost", parts.port, timeout=30)
    try:
        connection.putrequest("GET", path)
        connection.putheader(b"Authorization", authorization)
        connection.endheaders()
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_raw_header_bytes_over_http(paused_job: Job[Any, Any], live: Any) -> None:
    with access("token", ENDPOINT_TOKEN=TOKEN):
        for raw in (
            b"Bearer \xe9\xe9",  # latin-1
            "Bearer éé".encode(),  # UTF-8
            b"Bearer \xff\xfe\x80",
            b"Bearer " + TOKEN.encode() + b"\xe9",
        ):
            for url in (HEALTH, METRICS):
                status = raw_get(live.url, url, raw)
                print(raw, url, status)
                assert status == 401, raw
        assert raw_get(live.url, HEALTH, b"Bearer " + TOKEN.encode()) == 200
    # A token with non-ASCII characters matches the UTF-8 bytes a client sends for it.
    unusual = "jeton-secret-éèà-0123456789"
    with access("token", ENDPOINT_TOKEN=unusual):
        assert raw_get(live.url, HEALTH, b"Bearer " + unusual.encode()) == 200
        assert raw_get(live.url, HEALTH, b"Bearer " + unusual.encode("latin-1")) == 401


# -- item 7: staff need the admin's permissions for the same facts -------------------------------


def grant(user: Any, *codenames: str) -> Any:
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="django_advisory_cron", codename__in=codenames
        )
    )
    return user


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_staff_without_permissions_see_no_more_than_the_admin_shows_them(
    paused_job: Job[Any, Any], django_user_model: Any
) -> None:
    staff = logged_in(django_user_model.objects.create_user("staff", is_staff=True))
    with access("staff"):
        health, metrics = staff.get(HEALTH), staff.get(METRICS)
        print(health.status_code, health.content[:300])
        print(metrics.status_code)
        assert staff.get(RUNS).status_code == 403 and staff.get(JOBS).status_code == 403
        assert health.status_code == 403 and metrics.status_code == 403
        for response in (health, metrics):
            text = response.content.decode()
            assert "alice" not in text and "supplier outage" not in text
            assert "view_jobrun" in text and "ENDPOINT_ACCESS" in text


@pytest.mark.parametrize(
    ("codenames", "status"),
    [
        (("view_registeredjob",), 403),  # the Jobs page, but not the run history
        (("view_jobrun",), 403),  # the run history, but not the Jobs page
        (("view_registeredjob", "view_jobrun"), 200),
        (("view_registeredjob", "change_jobrun"), 200),  # the admin's rule: view or change
    ],
)
def test_staff_with_the_admin_permissions(
    paused_job: Job[Any, Any], django_user_model: Any, codenames: tuple[str, ...], status: int
) -> None:
    user = grant(django_user_model.objects.create_user("viewer", is_staff=True), *codenames)
    client = logged_in(user)
    with access("staff"):
        for url in (HEALTH, METRICS):
            assert client.get(url).status_code == status
    if status == 200:
        with access("staff"):
            document = client.get(HEALTH).json()
        job = next(item for item in document["jobs"] if item["job"] == "access.nightly")
        assert "alice" in job["paused"] and job["last_run"]["host"]


def test_superusers_inactive_users_and_non_staff(
    paused_job: Job[Any, Any], django_user_model: Any
) -> None:
    root = logged_in(django_user_model.objects.create_superuser("root", password="x"))
    everything = ("view_registeredjob", "view_jobrun")
    gone = grant(django_user_model.objects.create_user("gone", is_staff=True), *everything)
    gone_client = logged_in(gone)
    gone.is_active = False
    gone.save()
    outsider = logged_in(
        grant(django_user_model.objects.create_user("outsider", is_staff=False), *everything)
    )
    with access("staff"):
        assert root.get(HEALTH).status_code == 200 and root.get(METRICS).status_code == 200
        assert gone_client.get(HEALTH).status_code == 403
        assert outsider.get(HEALTH).status_code == 403
        assert Client().get(HEALTH).status_code == 403
