"""The test settings with a ``LOGGING`` that disables the loggers made before it applies
(``disable_existing_loggers``, Python's default), among them ``payments``, made here as a
settings module's own imports can make one."""

import logging

from tests.settings import *  # noqa: F403

logging.getLogger("payments")
LOGGING = {"version": 1, "disable_existing_loggers": True}
