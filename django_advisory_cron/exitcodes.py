"""Exit codes of ``manage.py runlocked`` (sysexits.h values where one fits)."""

OK = 0  # the job ran, or was skipped (another replica has it, its tick already ran, paused)
JOB_FAILED = 1  # the job raised; the run is recorded as failed and the traceback logged
USAGE = 2  # bad arguments, unknown job, invalid schedule
DATABASE_UNAVAILABLE = 69  # EX_UNAVAILABLE: the lock database cannot be reached, or is read-only
LOCK_LOST = 75  # EX_TEMPFAIL: the lock's connection died while the job ran
CONFIG = 78  # EX_CONFIG: the lock database is not PostgreSQL, or a transaction-scope misuse
TIMED_OUT = 124  # the job ran past its timeout: stopped, recorded timed out (as timeout(1))
SIGINT = 130  # interrupted by SIGINT (run recorded as interrupted, lock released)
SIGTERM = 143  # interrupted by SIGTERM (run recorded as interrupted, lock released)

# ``manage.py cronstatus`` (also 0 = healthy, 2 = usage, 69 = database unavailable):
UNHEALTHY = 3  # at least one job is overdue, late, stuck (stale lock) or failing

# ``manage.py cronjob trigger`` (also 0, 2, 69, 78; with --here, the codes of runlocked):
NO_WORKER = 4  # no cronworker is connected to pick the request up; nothing was recorded
