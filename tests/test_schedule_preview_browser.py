"""The schedule form's preview of the next ticks, in a real Chromium: as a cron expression and
a zone are typed, the ticks of what is typed replace the saved ones; a bad expression shows
why instead. (The preview view itself: tests/test_admin_schedules.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from tests.test_browser import Shooter, browser, login, page, screenshots, server

pytestmark = pytest.mark.browser

__all__ = ["browser", "page", "screenshots", "server"]  # fixtures, used by name


@pytest.fixture
def editor(db_url: str, django_user_model: Any) -> tuple[str, str]:
    user = django_user_model.objects.create_user("editor", password="s3cret-pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="django_advisory_cron",
            codename__in=["view_schedule", "add_schedule", "change_schedule"],
        )
    )
    return "editor", "s3cret-pw"


def test_the_add_form_previews_the_ticks_of_what_is_typed(
    page: Any,
    server: Any,
    editor: tuple[str, str],
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    login(page, server.url, editor)
    page.goto(f"{server.url}/admin/django_advisory_cron/schedule/add/")
    ticks = page.locator(".next-ticks .next-tick")
    expect(ticks).to_have_count(0)
    page.fill("#id_cron", "30 2 * * *")
    page.fill("#id_timezone", "Europe/Paris")
    expect(ticks).to_have_count(5)
    for text in ticks.all_inner_texts():
        assert " 02:30:00 UTC+0" in text, text
    Shooter(page, screenshots, capsys)("schedule-preview")
    page.fill("#id_cron", "61 * * * *")
    expect(page.locator(".next-ticks .next-tick-problem")).to_contain_text("bad cron expression")
    expect(ticks).to_have_count(0)
