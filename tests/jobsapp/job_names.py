"""Names and numbers that tests share with the jobs modules their subprocesses load, kept
apart so that a test reads them without importing a jobs module: importing one registers its
jobs in the test process for good, where other tests' checks then see them."""

#: Jobs due with ``lease_body`` at each of its ticks (claimed together with it), in
#: ``lease_tasks``.
LEASE_COMPANIONS = 3

#: The environment variable naming the folder where ``connection_tasks``' holding jobs say
#: they started and wait for their release file.
CONNECTION_SIGNALS = "CONNECTION_TEST_SIGNALS"

#: ``connection_tasks``' jobs due together every two seconds, with ``conn_tick_every2``.
CONNECTION_TOGETHER = [f"conn_tick_together_{number}" for number in range(6)]

#: ``connection_tasks``' four jobs that run until the test releases them, every so many
#: seconds (due at different moments: some alone, some together).
CONNECTION_HOLDING_EVERY = (1, 2, 3, 5)
CONNECTION_HOLDING = [f"conn_hold_every{seconds}" for seconds in CONNECTION_HOLDING_EVERY]

#: ``connection_tasks``' jobs keyed ``hashtext(name)`` (sharing their locks with SQL scripts)
#: that run until the test releases them, every so many seconds.
CONNECTION_HASHTEXT_EVERY = (1, 2, 3)
CONNECTION_HASHTEXT = [f"conn_hashtext_every{seconds}" for seconds in CONNECTION_HASHTEXT_EVERY]

#: ``connection_tasks``' jobs with ``wait=`` (they wait for their lock when another process
#: holds it) that run until the test releases them.
CONNECTION_WAITING = ["conn_wait_a", "conn_wait_b", "conn_wait_c"]

#: ``connection_tasks``' jobs whose ``using`` is another database alias (``second``, set in
#: the worker's settings by ``TESTS_SECOND_ALIAS``) that run until the test releases them.
CONNECTION_OTHER_DATABASE = ["conn_second_a", "conn_second_b", "conn_second_c"]
#: The environment variable that gives a test subprocess the ``second`` alias.
SECOND_ALIAS = "TESTS_SECOND_ALIAS"

#: The lease-scope tests' jobs (tests/jobsapp/lease_scope_tasks.py): the folder the holding job
#: writes its start into, and the jobs due every second with nothing to do.
LEASE_SCOPE_FOLDER = "LEASE_SCOPE_TEST_FOLDER"
LEASE_SCOPE_TICKING = [f"lease_tick_{letter}" for letter in "abcd"]
