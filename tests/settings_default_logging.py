"""The test settings with Django's default logging (no ``LOGGING``), as a new project has:
its loggers' effective level is WARNING, and the app's INFO lines print nowhere."""

from tests.settings import *  # noqa: F403

LOGGING = {}  # Django's own default: DEFAULT_LOGGING alone
