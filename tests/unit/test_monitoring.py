"""The monitoring settings' checks and Sentry's monitor config (the integrations at work:
tests/test_monitoring.py)."""

from __future__ import annotations

from django.test.utils import override_settings

from django_advisory_cron import locked_task
from django_advisory_cron.checks.configuration import check_monitoring, check_settings


def test_endpoint_settings_are_checked() -> None:
    with override_settings(ADVISORY_CRON={"ENDPOINT_ACCESS": "token"}):
        assert [error.id for error in check_settings()] == ["django_advisory_cron.E142"]
    bad = {
        "ENDPOINT_ACCESS": "public",
        "ENDPOINT_TOKEN": "short",
        "SENTRY_CRONS": "yes",
        "PING_URL": "https://hc-ping.com/no-placeholder",
        "PING_TIMEOUT": 0,
        "PING_RETRIES": -1,
        "OPENTELEMETRY": 1,
        "METRICS_WINDOW": "1d",
    }
    with override_settings(ADVISORY_CRON=bad):
        ids = sorted(str(error.id).rsplit(".", 1)[1] for error in check_settings())
    assert ids == ["E140", "E141", "E143", "E144", "E145", "E146", "E147", "E148"]


def test_monitoring_checks(fresh_registry: None) -> None:
    @locked_task(name="mon.fast", every=5)
    def fast() -> None: ...

    settings = {
        "SENTRY_CRONS": True,
        "PING_URL": {"mon.fast": "https://x/1", "gone": "https://x/2"},
    }
    with override_settings(ADVISORY_CRON=settings):
        found = {str(error.id).rsplit(".", 1)[1]: error.msg for error in check_monitoring()}
    assert set(found) == {"W042", "W043"}
    assert "'mon.fast' (every 5s)" in found["W042"]
    assert "'gone'" in found["W043"]


def test_sentry_monitor_config_follows_the_job(fresh_registry: None) -> None:
    from django_advisory_cron.contrib.sentry import monitor_config, monitor_slug

    @locked_task(name="Billing.Nightly Run", schedule="@daily", max_runtime=600)
    def nightly() -> None: ...

    @locked_task(name="mon.five", every=300)
    def five() -> None: ...

    @locked_task(name="mon.plain")
    def plain() -> None: ...

    assert monitor_slug(nightly.name) == "billing-nightly-run"
    assert monitor_config(nightly) == {
        "schedule": {"type": "crontab", "value": "0 0 * * *"},
        "timezone": "UTC",
        "checkin_margin": 6,  # (MAX_SKEW 60 + OVERDUE_GRACE 300) s
        "max_runtime": 10,
    }
    assert monitor_config(five) == {
        "schedule": {"type": "interval", "value": 5, "unit": "minute"},
        "timezone": "UTC",
        "checkin_margin": 6,
    }
    assert monitor_config(plain) is None
