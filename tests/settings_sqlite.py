"""The test settings on a SQLite database, as a project's own test or development settings
often are: ``migrate``, ``check`` and the project's other commands must keep working; the
app's commands refuse in one line. The file is ``TESTS_SQLITE_PATH``."""

import os

from tests.settings import *  # noqa: F403

DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["TESTS_SQLITE_PATH"]}
}
