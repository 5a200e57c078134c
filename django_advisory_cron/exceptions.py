"""Every error this app raises, under one base class: ``except AdvisoryCronError`` catches them.

``JobTimedOut`` and the stops of [Interrupted][django_advisory_cron.exceptions.Interrupted]
are ``BaseException``: they stop a run, as ``KeyboardInterrupt`` does, and a job's
``except Exception`` must not swallow them.
"""

from __future__ import annotations

from django.core.management.base import CommandError


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message that says something (its class name when it has
    none): what a one-line report shows. Headers that only announce lines below them, as
    Django's "System check identified some issues:" and "ERRORS:", are passed over."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = [line for line in lines if not line.endswith(":")]
    return (telling or lines or [type(error).__name__])[0]


class AdvisoryCronError(Exception):
    """Base class for this app's errors."""


class InvalidSchedule(AdvisoryCronError, ValueError):
    """A cron expression that cannot be parsed."""


class LockNotAcquired(AdvisoryCronError):
    """Another process holds the job's lock (raised when ``on_locked="raise"``)."""


class LockScopeError(AdvisoryCronError):
    """A lock scope cannot be used here (e.g. transaction scope inside ``atomic()``)."""


class LockDatabaseError(AdvisoryCronError):
    """The lock database alias is not usable for advisory locks (not PostgreSQL)."""


class DatabaseUnavailable(AdvisoryCronError):
    """The lock database could not be reached, or did not answer in time."""


class ServerIsStandby(DatabaseUnavailable):
    """The lock database's server is a standby (in recovery): a lock taken there would
    exclude nobody on the primary, so none is taken; unavailable until it is promoted or
    the connection reaches the primary."""


class DatabaseReadOnly(DatabaseUnavailable):
    """The lock database refuses writes (``default_transaction_read_only`` is on, or the server
    was switched to read-only): no run can be claimed or recorded, so none starts;
    unavailable until it accepts writes again."""


class LockLost(AdvisoryCronError):
    """The lock's connection died, or its backend no longer holds the lock, while a job ran.

    Raised in the job's thread at its next database query (and, under ``runlocked``, at once),
    so that a run that can no longer prove it is alone stops.
    """


class RunCancelled(AdvisoryCronError):
    """Raised once in a job's thread, at its next database query, when a new tick's run asked
    this run to stop (``overlap="cancel_other"``): the body stops, cleaning up as it likes
    (its later queries go through); a body still going after the grace is terminated as
    ``terminate_other`` does. A run in a process's main thread gets SIGTERM instead."""


class JobTimedOut(BaseException):
    """Raised in the thread of a job that ran past its ``timeout``, so the run unwinds,
    records ``timed_out`` (its tick stays taken) and releases its lock.

    A ``BaseException``, like ``KeyboardInterrupt``: it stops a run, and a job's
    ``except Exception`` must not swallow it. Raised only in a process that runs one job in
    its main thread (``runlocked``, and the processes ``cronworker`` starts).
    """

    def __init__(self, timeout: float) -> None:
        super().__init__(f"stopped after its timeout of {timeout:g} s")
        self.timeout = timeout


#: The attribute that names the signal which raised an exception in a running job (set on the
#: [Interrupted][django_advisory_cron.exceptions.Interrupted] classes, and by the runner on
#: whatever another signal handler raised while a job ran in the main thread).
SIGNAL_ATTRIBUTE = "advisory_cron_signal"


def stopping_signal(error: BaseException | None) -> str | None:
    """The name of the signal (``"SIGTERM"``) whose handler raised ``error`` while a job ran:
    a stop from outside, recorded ``interrupted``. ``None`` for anything the job's own code
    raised, whatever its class (``SystemExit``, a ``KeyboardInterrupt`` it raised itself):
    that run failed."""
    name = getattr(error, SIGNAL_ATTRIBUTE, None)
    return name if isinstance(name, str) else None


class Interrupted(BaseException):
    """A run stopped from outside: raised in the job's thread by a signal its process received
    (see its subclasses). The run is recorded ``interrupted`` and gives its tick back."""

    advisory_cron_signal = "a signal"


class Terminated(Interrupted):
    """Raised in the main thread by SIGTERM (``runlocked``, ``cronjob trigger --here``, the
    processes ``cronworker`` starts) so the run unwinds, records and unlocks."""

    advisory_cron_signal = "SIGTERM"


class SigintReceived(Interrupted, KeyboardInterrupt):
    """Raised in the main thread by SIGINT (Ctrl-C) while a job runs there, so the run is
    recorded ``interrupted``; a ``KeyboardInterrupt``, so code that stops on Ctrl-C still
    does. A ``KeyboardInterrupt`` raised by the job's own code is a failure instead."""

    advisory_cron_signal = "SIGINT"


class JobFailed(AdvisoryCronError):
    """A job's code raised something that is not an ``Exception`` (``SystemExit``,
    ``GeneratorExit``, a ``KeyboardInterrupt`` it raised itself): raised by a task delivery in
    its place (chained to it), so the task worker records a failed task instead of stopping."""


class UnknownJob(AdvisoryCronError, LookupError):
    """No registered job (or management command) has this name."""


class ProbeError(AdvisoryCronError):
    """A pooling probe step failed (connection refused, query error, ...)."""


class ProbeTimeout(ProbeError):
    """A pooling probe step did not finish before its client-side deadline."""


class CommandFailed(AdvisoryCronError, CommandError):
    """A management command of this app failed: a ``CommandError`` with its exit status.

    Django prints the message and exits with ``returncode``; ``except AdvisoryCronError`` and
    ``except CommandError`` both catch it.
    """

    def __init__(self, message: str, returncode: int = 1) -> None:
        super().__init__(message, returncode=returncode)


class ScheduleSyncTimeout(AdvisoryCronError, TimeoutError):
    """Another process held the django-q2 schedule sync lock for too long."""
