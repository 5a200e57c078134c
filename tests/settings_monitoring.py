"""The test settings plus the Sentry SDK, sending to the DSN a test's local server gives."""

import os

import sentry_sdk

from tests.settings import *  # noqa: F403

if os.environ.get("SENTRY_DSN"):
    sentry_sdk.init(dsn=os.environ["SENTRY_DSN"], shutdown_timeout=10)
