"""The jitter tests' schedule, read by their jobs (``jitter_tasks``) and by the tests, which
must not import the jobs module: that would register its jobs in the test process."""

#: The jobs' interval and jitter, in seconds.
EVERY, JITTER = 5, 4
