"""Signals sent around job runs. Every signal's ``sender`` is the ``Job``.

- ``job_started(run)``: the lock is held and the run is recorded; the job is about to run.
- ``job_skipped(run)``: another process held the lock, or this tick already ran.
- ``job_finished(run)``: the job returned; ``run.value`` is its result.
- ``job_failed(run, exception)``: the job raised (or was interrupted).
- ``lock_lost(run, lock, error)``: a session lock's connection died while the job ran
  (``sender`` is ``None`` and ``run`` is ``None`` for a bare ``advisory_lock()``).
"""

from django.dispatch import Signal

job_started = Signal()
job_skipped = Signal()
job_finished = Signal()
job_failed = Signal()
lock_lost = Signal()
