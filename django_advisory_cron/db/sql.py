"""Every statement this app sends to PostgreSQL: a function for each statement of ``queries.sql``.

Each function returns ``(sql, params)``: its statement's text, literal and named in
``queries.sql`` (a statement seen in a server log is found there as it was sent; a part a call
may leave out is guarded by a parameter, not spliced in), and its named parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from ..core.keys import LockKey
from ..core.scopes import ResolvedScope
from ..core.text import storable
from .queries import QUERIES

Statement = tuple[str, Mapping[str, Any]]


# -- the lock alone ----------------------------------------------------------------------------

#: ``application_name`` of a connection while it holds a lock taken with ``advisory_lock()``,
#: followed by the lock's name: ``pg_stat_activity`` and the held-locks page name a lock that
#: is no job's by it.
LOCK_APPLICATION_NAME = "django-advisory-cron lock: "


#: Where a session lock's connection keeps the name it had before the lock named it (a custom
#: setting of the session: reading ``pg_settings`` for the name it was opened with would cost
#: more than the lock and its unlock together).
HOME_NAME = "django_advisory_cron.home_name"


def key_params(key: LockKey) -> dict[str, Any]:
    """One key's parameters: ``lock_ns`` and ``lock_id``, or ``lock_name`` for a ``hashtext``
    key; the other form NULL."""
    return {"lock_ns": None, "lock_id": None, "lock_name": None, **key.params}


def _keys(keys: Sequence[LockKey]) -> dict[str, list[Any]]:
    """The keys of a statement over ``unnest``: the two-int form's ints, or a ``hashtext``
    key's name."""
    columns: dict[str, list[Any]] = {"classids": [], "objids": [], "hashed": []}
    for key in keys:
        ints = key.mode == "sha256"
        columns["classids"].append(key.namespace if ints else None)
        columns["objids"].append(key.objid if ints else None)
        columns["hashed"].append(None if ints else key.text)
    return columns


def try_lock(key: LockKey, scope: ResolvedScope) -> Statement:
    """Try the lock once; one boolean column. A taken lock names its connection after itself
    (in transaction scope until the transaction ends; in session scope until ``unlock``, which
    gives back the name kept in ``HOME_NAME``). A target list is evaluated left to right."""
    return QUERIES[f"try_lock_{scope}"], {
        **key_params(key),
        "lock_label": LOCK_APPLICATION_NAME + key.name,
    }


def unlock(key: LockKey) -> Statement:
    """Release a session lock, then any other session lock of this backend, and name the
    connection as it was opened; the first column is false when this backend did not hold the
    key."""
    return QUERIES["unlock"], key_params(key)


def unlock_one(key: LockKey) -> Statement:
    """Release one session lock of a connection that holds others; false when not held."""
    return QUERIES["unlock_one"], key_params(key)


def ends_with_transaction(scope: ResolvedScope) -> bool:
    """A lock of ``scope`` is released by the end of its transaction, never by ``unlock``: a
    lease run's claim takes its lock in the claim's own transaction, and holds none after."""
    return scope != "session"


def release_lock(key: LockKey, scope: ResolvedScope, *, shared: bool = False) -> Statement | None:
    """Release a taken lock with nothing to record: in session scope ``unlock`` (``unlock_one``
    on a connection ``shared`` with other holders); in transaction scope nothing to send, the
    commit ends the lock."""
    if ends_with_transaction(scope):
        return None
    return unlock_one(key) if shared else unlock(key)


def lock_held(key: LockKey) -> Statement:
    """Whether this connection's backend still holds ``key``; one boolean column."""
    return QUERIES["lock_held"], _keys([key])


def backend_pid() -> Statement:
    return QUERIES["backend_pid"], {}


def in_recovery() -> Statement:
    """Whether the server is a standby, asked when its login said so (a pooler may repeat a
    login parameter of its own first server connection, from before a promotion)."""
    return QUERIES["in_recovery"], {}


def synchronous_standby_names() -> Statement:
    """The standbys the server waits for when a commit asks (empty: none)."""
    return QUERIES["synchronous_standby_names"], {}


def usable_connections() -> Statement:
    """How many connections the server gives ordinary roles: ``max_connections`` less the
    reserved ones (``reserved_connections`` exists from PostgreSQL 16)."""
    return QUERIES["usable_connections"], {}


def database_now() -> Statement:
    """The database server's clock, on which ticks are judged."""
    return QUERIES["database_now"], {}


# -- the run row -----------------------------------------------------------------------------


class Claim(NamedTuple):
    """One run a claim asks for: its job, its lock key, the ``(instant, tick)`` pairs its
    reference time is matched against, and that reference (``None``: the database's ``now()``)."""

    job: str
    key: LockKey
    matches: Sequence[tuple[datetime, datetime]]
    reference: datetime | None
    #: A "run now": a pause does not hold it back (it has no tick).
    manual: bool = False
    #: The task result id when a task queue delivered the run (else empty).
    task_id: str = ""
    #: At most once: a tick with an interrupted run (or a dead one, marked interrupted now) is
    #: taken.
    once: bool = False
    #: The keys of its job's run slots when it may run several times at once (``key`` first);
    #: empty: its one key.
    slots: Sequence[LockKey] = ()


def claim_runs(
    claims: Sequence[Claim],
    scope: ResolvedScope,
    *,
    host: str,
    pid: int,
    max_skew: float,
    lease: float | None,
    final: bool,
    settle: bool,
    record_skips: bool,
    census: str | None = None,
    synchronous_commit: str | None = None,
) -> Statement:
    """Take the locks and claim the ticks of one or several runs, in one round trip: the one
    claim algorithm (a single run is a batch of one). One tick per job.

    Returns one row per claim, in order: ``(released, got, run_id, tick, reference,
    interrupted, live, paused, slot)``:

    - ``paused``: NULL, or why the job is paused (an operator paused it, and the pause has not
      expired): the lock is not tried (a job waiting for its lock waits for a resume alike). A
      manual run ("run now") ignores a pause.
    - ``live``: rows of this job whose lease has not expired, whatever their status (a
      ``running`` row, or a ``lock_lost`` one whose body has not ended yet). A holder whose
      lock connection died may still be running its body, so while such a row exists the
      lock is not even tried (holding it would not prove that the old holder stopped).
    - ``interrupted``: ``running`` rows whose lease expired, marked ``interrupted`` now (a
      ``lock_lost`` row is never marked: its tick stays taken).
    - ``tick``: the tick of the ``(instant, tick)`` match nearest the reference time, within
      ``max_skew`` (a tick can be matched at two instants on the night the clocks go back).
    - ``run_id`` is NULL when the tick is already taken; for an ``once`` (at most once) claim,
      also when a run of the tick was interrupted, or is found dead and marked so now.
    - ``released``: with ``settle`` (session scope), a job whose tick already ran has its lock
      released here, so a replica that finds every tick taken has nothing more to send.
    - ``slot``: for a claim with ``slots`` (a job that may run several times at once), which
      of them it took, from 1 (NULL: none, or a claim without them). Such a claim goes ahead
      while fewer of its job's rows are ``live`` than it has slots.

    A replica that loses a tick writes nothing: its whole cost is this round trip. Skips are
    written here, as rows, only with ``record_skips`` and for manual runs (an operator's
    request, one per request, is told what became of it): on the ``final`` attempt for a lock
    held elsewhere or a paused job (``skipped_locked``, ``skipped_paused``), and for a tick
    found taken when it is ``settle``d (``skipped_tick``; otherwise that row is the
    release's: ``skip_tick``).

    ``lease`` is NULL for transaction scope: the row is invisible until the run commits.
    ``synchronous_commit`` (``SYNCHRONOUS_COMMIT``) makes a written claim wait for a
    synchronous standby (``set_config(..., true)`` in the ``RETURNING`` of the rows it writes:
    this transaction only, never the job's own work on other connections; a statement that
    writes nothing waits for nothing), so that a failover does not lose it.

    With ``census`` (a worker's claims), each row also carries the server's clock (as late in
    the statement as it can be read: a clock taken from it is never ahead), the
    ``application_name`` of every live worker (those starting with ``census``) and whether a
    "run now" request is pending: a worker's clock, its view of the fleet and its look for
    missed requests come with its claims, not in statements of their own.
    """
    assert not (settle and ends_with_transaction(scope)), (
        "only a session lock is released on its own"
    )
    numbered = [(n, match) for n, claim in enumerate(claims, 1) for match in claim.matches]
    slots = [(n, key) for n, claim in enumerate(claims, 1) for key in claim.slots]
    slot_keys = _keys([key for _n, key in slots])
    params = {
        "jobs": [claim.job for claim in claims],
        **_keys([claim.key for claim in claims]),
        "refs": [claim.reference for claim in claims],
        "manual": [claim.manual for claim in claims],
        "task_ids": [storable(claim.task_id) for claim in claims],
        "once": [claim.once for claim in claims],
        "match_n": [n for n, _match in numbered],
        "match_at": [at for _n, (at, _tick) in numbered],
        "match_tick": [tick for _n, (_at, tick) in numbered],
        "skew": max_skew,
        "host": storable(host),
        "pid": pid,
        "transaction": ends_with_transaction(scope),
        "lease": lease or None,
        "final": final,
        "settle": settle,
        "record": record_skips,
        "prefix": census,
        "synchronous_commit": synchronous_commit,
        "slot_n": [n for n, _key in slots],
        **{f"slot_{column}": values for column, values in slot_keys.items()},
    }
    return QUERIES["claim_runs_census" if census else "claim_runs"], params


def who_params(job: str, host: str, pid: int, task_id: str = "") -> dict[str, Any]:
    """Who writes a row: the job, the host and process, and the task (storable text)."""
    return {"job": job, "host": storable(host), "pid": pid, "task_id": storable(task_id)}


def renew_leases(
    runs: Sequence[tuple[int, LockKey]], *, lease: float, watch: bool = False
) -> Statement:
    """The heartbeat of one run, or of the runs claimed together on one connection: renew the
    lease of each run whose lock this backend still holds, in one round trip. One row per run,
    in order: its lock is held and its lease renewed (false: it lost its lock), then, with
    ``watch`` (one run of an ``overlap="cancel_other"`` job), the text of a new run's request
    that it stop (else NULL). Only ``running`` rows are renewed: a ``lock_lost`` row keeps the
    lease it had, which runs out."""
    params = {
        "ids": [run for run, _key in runs],
        **_keys([key for _run, key in runs]),
        "lease": lease,
        "watch": watch,
    }
    return QUERIES["renew_leases"], params


def renew_row_leases(runs: Sequence[int], *, lease: float) -> Statement:
    """The heartbeat of the lease-scope runs claimed together on one connection: renew each
    running row's lease while it has not run out, in one round trip. One boolean row per run,
    in order: renewed (false: it lost its lease)."""
    return QUERIES["renew_row_leases"], {"ids": list(runs), "lease": lease}


def claim_tick(
    *,
    job: str,
    host: str,
    pid: int,
    tick: datetime | None,
    lease: float | None,
    task_id: str = "",
    synchronous_commit: str | None = None,
) -> Statement:
    """Claim a tick that the acquiring statement's own ``dead`` step just gave back (inside one
    statement the old row version still conflicts). Returns the run id, or no row."""
    params = {"tick": tick, "lease": lease or None, "synchronous_commit": synchronous_commit}
    return QUERIES["claim_tick"], {**who_params(job, host, pid, task_id), **params}


def _then_unlock(key: LockKey, scope: ResolvedScope, shared: bool) -> dict[str, Any]:
    """The parameters of the unlock that ends ``finish_run`` and ``skip_tick``: in session
    scope it unlocks ``key`` (then everything, unless the connection is ``shared`` by other
    holders) in the same round trip; the first column is the unlock's result (``true`` in
    transaction scope)."""
    return {**key_params(key), "transaction": ends_with_transaction(scope), "shared": shared}


def finish_run(
    key: LockKey,
    scope: ResolvedScope,
    *,
    run_id: int,
    status: str,
    error: str,
    attempts: int = 1,
    output: str = "",
    shared: bool = False,
    synchronous_commit: str | None = None,
) -> Statement:
    """Finish the run row with how many ``attempts`` its body took and what it captured
    (and unlock, in session scope; see ``_then_unlock``)."""
    params = {
        **_then_unlock(key, scope, shared),
        "status": status,
        "error": storable(error),
        "id": run_id,
        "attempts": attempts,
        "output": storable(output),
        "synchronous_commit": synchronous_commit,
    }
    return QUERIES["finish_run"], params


def skip_tick(
    key: LockKey,
    scope: ResolvedScope,
    *,
    job: str,
    host: str,
    pid: int,
    tick: datetime | None,
    task_id: str = "",
    shared: bool = False,
) -> Statement:
    """Record a skip for a tick that already ran (and unlock, in session scope; see
    ``_then_unlock``)."""
    who = who_params(job, host, pid, task_id)
    return QUERIES["skip_tick"], {**_then_unlock(key, scope, shared), **who, "tick": tick}


def mark_lock_lost(*, run_id: int, job: str, host: str, pid: int, error: str) -> Statement:
    """Mark a running run ``lock_lost`` as soon as the loss is seen. Its lease is kept, not
    renewed: its body may still run, and the other replicas wait for the lease to run out
    (or for ``record_lost_run``, when the body ends) before they start the job again."""
    return QUERIES["mark_lock_lost"], {
        **who_params(job, host, pid),
        "id": run_id,
        "error": storable(error),
    }


def record_lost_run(
    *,
    run_id: int | None,
    job: str,
    host: str,
    pid: int,
    tick: datetime | None,
    status: str,
    error: str,
    attempts: int = 1,
    output: str = "",
    task_id: str = "",
) -> Statement:
    """Record the end of a run whose lock was lost, once its body has ended, through another
    connection than the lost one.

    Its row (session scope) is finished as ``finish_run`` finishes it, with how many
    ``attempts`` its body took and what it captured (a row already closed keeps its own). A
    row that rolled back with its lost connection (transaction scope: ``run_id`` is gone, or
    was never known) is written again: its tick stays taken (``lock_lost`` and ``failed`` take
    it) unless another replica already ran it, in which case this row is kept without a tick,
    so the history still shows it."""
    who = who_params(job, host, pid, task_id)
    return QUERIES["record_lost_run"], {
        **who,
        "id": run_id,
        "tick": tick,
        "status": status,
        "error": storable(error),
        "attempts": attempts,
        "output": storable(output),
    }


def fail_committed_run(*, run_id: int, error: str) -> Statement:
    """A run whose transaction committed but whose ``on_commit`` callback raised: failed."""
    return QUERIES["fail_committed_run"], {"id": run_id, "error": storable(error)}


# -- enqueueing a tick to a task queue ---------------------------------------------------------


def claim_enqueue(
    *,
    job: str,
    tick: datetime,
    backend: str,
    host: str,
    pid: int,
    keep_days: int,
    lease: float | None,
    record: bool,
    unsure: str,
) -> Statement:
    """Claim the enqueueing of ``(job, tick)``: one row ``(claim_id, ran, paused, run_id,
    dead)``; ``claim_id`` is NULL for every scheduler but the first, for all of them once the
    tick has a run (a late scheduler, or one after ``runlocked`` ran the tick by hand), which
    ``ran`` tells apart, and while the job is paused, which ``paused`` says (why, as a skip row
    would).

    The winner also deletes this job's claims for ticks more than ``keep_days`` before this
    one, so the table stays as small as the ticks it still has to tell apart.

    With a ``lease`` (seconds: how long a send may take), every claimer ends this job's claims
    whose task id is still empty past it (their sender never had the queue's answer: it died,
    or hung) as ``failed``, saying so, with ``unsure`` (what became of the message): it writes
    the tick's run, unless the tick has one already (the task ran), or ends the send's own run
    (``record``). ``dead`` is ``[[run id, tick, error], ...]`` of those, or NULL.

    With ``record`` the send is the tick's run: the winner writes it ``running`` now
    (``run_id``), leased, a send in flight (not a tick that ``ran``).
    """
    params = {
        **who_params(job, host, pid),
        "tick": tick,
        "backend": backend,
        "keep": keep_days,
        "lease": lease,
        "record": record,
        "unsure": unsure,
    }
    return QUERIES["claim_enqueue"], params


def enqueued(*, claim_id: int, task_id: str, run_id: int | None = None) -> Statement:
    """Store the task result id the backend returned on the claim, and on the tick's run
    ``run_id`` (written at the claim) if any: succeeded (sent) with it, until now, whatever
    became of it meanwhile (a sender slower than its lease, found dead, was not). One row
    ``(run id,)`` then."""
    params = {"id": claim_id, "task_id": storable(task_id), "run": run_id}
    return QUERIES["enqueued" if run_id is None else "enqueued_run"], params


def release_claim(*, claim_id: int) -> Statement:
    """Give the claim back after a failed enqueue, so the tick can be enqueued again."""
    return QUERIES["release_claim"], {"id": claim_id}


def refused_send(*, claim_id: int, run_id: int | None, error: str) -> Statement:
    """Record a claimed tick whose message the queue refused: its run ``run_id`` (written at
    the claim) failed, with ``error`` (the claim goes: the failed run takes the tick). One row
    ``(run id,)``, none without a run (the tick had one already)."""
    return QUERIES["refused_send"], {"id": claim_id, "run": run_id, "error": storable(error)}


def unclaimed_send(
    *, job: str, host: str, pid: int, started: datetime, manual: bool, task_id: str, error: str
) -> Statement:
    """Record a send that claimed no tick (a manual run, or one off the schedule) as its run,
    with no tick: succeeded with the queue's ``task_id``, or failed with ``error``. One row
    ``(run id,)``."""
    return QUERIES["unclaimed_send"], {
        **who_params(job, host, pid, task_id),
        "started": started,
        "manual": manual,
        "error": storable(error),
    }


# -- the worker: overlapping ticks and runs in child processes ----------------------------


def skip_overlapping(*, job: str, host: str, pid: int, tick: datetime, otherwise: str) -> Statement:
    """Record a tick skipped because the job's previous run is still going (Kubernetes'
    ``concurrencyPolicy: Forbid``). The error text names the job's row whose body has not
    ended (``running``, or ``lock_lost`` while its body goes on) if there is one, else is
    ``otherwise``. Returns the error text recorded."""
    params = {**who_params(job, host, pid), "tick": tick, "otherwise": storable(otherwise)}
    return QUERIES["skip_overlapping"], params


def child_run(*, job: str, host: str, pid: int, tick: datetime | None) -> Statement:
    """The latest row a worker's child process wrote for ``tick``: ``(id, status)``."""
    return QUERIES["child_run"], {**who_params(job, host, pid), "tick": tick}


def finish_child_run(
    *, job: str, host: str, pid: int, tick: datetime | None, status: str, error: str
) -> Statement:
    """Finish the run of a worker's child process that was killed: its row, if still
    ``running`` (or ``lock_lost``), gets ``status``; if the process left no row for the tick
    (a transaction-scoped row rolls back with its connection), one is inserted. A row the
    process finished itself is kept as it is."""
    params = {
        **who_params(job, host, pid),
        "tick": tick,
        "status": status,
        "error": storable(error),
    }
    return QUERIES["finish_child_run"], params


# -- pause, resume, run now -------------------------------------------------------------------

#: The channel "run now" requests are announced on (the payload is the job's name).
RUN_CHANNEL = "django_advisory_cron_run"


def request_run(*, job: str, by: str) -> Statement:
    """Record a "run now" request and wake the workers that LISTEN, in one statement (the
    notification goes out when it commits). A request still pending is kept, not doubled.
    One column: when the pending request was made."""
    return QUERIES["request_run"], {"job": job, "by": by, "channel": RUN_CHANNEL}


def claim_run_requests(jobs: list[str]) -> Statement:
    """Take the pending "run now" requests of ``jobs``: each is returned to one worker only
    (a concurrent claim waits for the row, then finds it taken). Rows: job, when, by whom."""
    return QUERIES["claim_run_requests"], {"jobs": list(jobs)}


def claim_tenant_run_requests(jobs: list[str]) -> Statement:
    """Take the pending "run now" requests of the tenants (``name@schema``) of the per-tenant
    ``jobs``, as ``claim_run_requests`` does. Rows: job (``name@schema``), when, by whom."""
    return QUERIES["claim_tenant_run_requests"], {"jobs": list(jobs)}


def latest_recorded_ticks(jobs: list[str]) -> Statement:
    """The latest tick each of ``jobs`` has a row for, whatever its status: rows ``(job,
    tick)``, one per job, ``tick`` NULL for a job with no recorded tick. Every recorded tick
    counts, skips included: a tick skipped because the previous run was still going was
    decided, not missed; so does a pause up to its end, and a reset of an override (the
    statement's comment in ``queries.sql`` says how, and which indexes it walks). Pruning keeps
    the rows it reads (``JobRun.objects.prunable``)."""
    return QUERIES["latest_recorded_ticks"], {"jobs": list(jobs)}


#: Where the database's schedules announce a change (their table's trigger, migration 0010).
SCHEDULES_CHANNEL = "django_advisory_cron_schedules"


def listen() -> list[Statement]:
    """Subscribe this session to "run now" announcements (``RUN_CHANNEL``) and to changes of
    the database's schedules (``SCHEDULES_CHANNEL``); needs a direct connection."""
    return [(QUERIES["listen_runs"], {}), (QUERIES["listen_schedules"], {})]


# -- the pooling probe and the admin --------------------------------------------------------


def schedule_rows() -> Statement:
    """Every schedule kept in the database, and the version they make (the same as a
    sighting's), read together: its options in the order of the options' table, then
    ``changed`` (the catalog names them so), the names of its times Python cannot hold (read
    as ``NULL``; ``''``: none), then the version, one row each; a single row of ``NULL``
    columns and the version when there is none."""
    return QUERIES["schedule_rows"], {}


def change_said(*, who: str, note: str) -> Statement:
    """Name who makes this transaction's writes to the schedules, and why, for their versions
    (``jobs.versions.changing``)."""
    return QUERIES["change_said"], {"who": storable(who)[:150], "note": storable(note)}


def unclaimed_ticks(due: Sequence[tuple[str, datetime]]) -> Statement:
    """Which of the ``(job, tick)`` pairs ``due`` no run has taken yet, in one read that tries
    no lock: a row ``(n,)`` for each, its 1-based position in ``due``, in order. A tick whose
    ``running`` row's lease has expired counts as untaken (the claim marks it dead)."""
    return QUERIES["unclaimed_ticks"], {
        "jobs": [job for job, _tick in due],
        "ticks": [tick for _job, tick in due],
    }


def sighting(prefix: str) -> Statement:
    """What a worker's claim reads besides its runs (see ``claim_runs``), alone: for a
    worker that has not claimed for a while (the live workers: the sessions whose
    ``application_name`` starts with ``prefix``)."""
    return QUERIES["sighting"], {"prefix": prefix}


def live_workers(prefix: str) -> Statement:
    """The sessions of live ``cronworker`` processes (their ``application_name`` starts with
    ``prefix``), oldest first: ``(application_name, backend_start, client_addr)``."""
    return QUERIES["live_workers"], {"prefix": prefix}


def probe_lock(key: LockKey) -> str:
    """Client A of the pooling probe: its backend pid and a shared lock on the probe key.

    Literal values (the probe speaks the simple query protocol): the integers are written in."""
    return QUERIES["probe_lock"] % {"classid": int(key.namespace), "objid": int(key.objid)}


def probe_still_held(pid: int, ids: tuple[int, int, int]) -> str:
    """Client B of the pooling probe: is client A's shared lock still held by its backend?"""
    classid, objid, objsubid = ids
    values = {"pid": int(pid), "classid": int(classid), "objid": int(objid)}
    return QUERIES["probe_still_held"] % {**values, "objsubid": int(objsubid)}


def terminate_holders(pids: list[int]) -> Statement:
    """Terminate the backends among ``pids`` that hold an advisory lock now (never our own);
    checking and terminating in one statement, so a pid reused since is refused."""
    return QUERIES["terminate_holders"], {"pids": list(pids)}
