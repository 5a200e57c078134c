"""The test settings plus an app whose jobs have schedules that never fire, or fire rarely."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.badjobs_never"]
