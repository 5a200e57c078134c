"""The test settings plus an app whose job has an invalid cron expression."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.badjobs"]
