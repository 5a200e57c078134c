"""Settings the type checker loads: the test settings, without starting a PostgreSQL server.

mypy's Django plugin imports settings and exits without running ``atexit`` handlers, so a
throwaway server started there would be left running.
"""

import os

os.environ.setdefault("DATABASE_URL", "postgresql://typecheck@127.0.0.1:1/typecheck")

from tests.settings import *  # noqa: F403
