"""Settings for the unit tier (tests/unit): the test settings with a PostgreSQL entry that is
never connected, so that no server is looked for or started.

A unit test that touches the database fails at once: pytest-django's blocker refuses a query
without the ``db`` mark, and with it the connection to this address is refused.
"""

import os

os.environ["DATABASE_URL"] = "postgresql://unit@127.0.0.1:1/unit-tests-have-no-database"
os.environ.pop("TESTS_THROWAWAY_FOR", None)

from tests.settings import *  # noqa: F403
