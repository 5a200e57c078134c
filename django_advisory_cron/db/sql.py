"""Every statement this app sends to PostgreSQL, in one place.

Each function returns ``(sql, params)`` with named placeholders. The run-history table name is
quoted once and the status values are filled in once (``names()``), from the model; the model
is imported lazily, so importing this module needs no app registry.

The lock statements take a [LockKey][django_advisory_cron.core.keys.LockKey], whose ``sql`` renders
the key arguments (two ints, or ``hashtext(name)``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from ..core.keys import LockKey
from ..core.scopes import ResolvedScope

Statement = tuple[str, Mapping[str, Any]]

#: Advisory locks of the current database, as ``pg_locks`` lists them.
ADVISORY_LOCKS = (
    "SELECT * FROM pg_locks WHERE locktype = 'advisory' "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


@functools.cache
def names() -> dict[str, str]:
    """The quoted history table and the status literals, for ``str.format``."""
    from ..models import TICK_TAKING, EnqueuedTick, JobRun, JobState, RunStatus, Schedule

    def quote(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    values = {f"s_{status.name.lower()}": f"'{status.value}'" for status in RunStatus}
    taking = ", ".join(f"'{status.value}'" for status in TICK_TAKING)
    return {
        "table": quote(JobRun._meta.db_table),
        "state": quote(JobState._meta.db_table),
        "claims": quote(EnqueuedTick._meta.db_table),
        "schedules": quote(Schedule._meta.db_table),
        "taking": taking,
        **values,
    }


@functools.cache
def _fill(template: str) -> str:
    return template.format(**names())


# -- the lock alone ----------------------------------------------------------------------------


#: The function trying a lock, per scope.
TRY_LOCK: dict[ResolvedScope, str] = {
    "session": "pg_try_advisory_lock",
    "transaction": "pg_try_advisory_xact_lock",
}


#: ``application_name`` of a connection while it holds a lock taken with ``advisory_lock()``,
#: followed by the lock's name: ``pg_stat_activity`` and the held-locks page name a lock that
#: is no job's by it.
LOCK_APPLICATION_NAME = "django-advisory-cron lock: "


#: Where a session lock's connection keeps the name it had before the lock named it (a custom
#: setting of the session: reading ``pg_settings`` for the name it was opened with would cost
#: more than the lock and its unlock together).
HOME_NAME = "django_advisory_cron.home_name"


def try_lock(key: LockKey, scope: ResolvedScope) -> Statement:
    """Try the lock once; one boolean column. A taken lock names its connection after itself
    (in transaction scope until the transaction ends; in session scope until ``unlock``, which
    gives back the name kept in ``HOME_NAME``). A target list is evaluated left to right."""
    if scope == "transaction":
        rename = "set_config('application_name', %(lock_label)s, true)"
    else:
        rename = (
            f"set_config('{HOME_NAME}', current_setting('application_name'), false), "
            "set_config('application_name', %(lock_label)s, false)"
        )
    return (
        f"SELECT got, CASE WHEN got THEN ARRAY[{rename}] END "
        f"FROM (SELECT {TRY_LOCK[scope]}({key.sql}) AS got) AS t",
        {**key.params, "lock_label": LOCK_APPLICATION_NAME + key.name},
    )


#: After an unlock, in the same statement: the connection takes back the name it had before
#: the lock named it (see ``try_lock``).
RENAME_BACK = (
    f"set_config('application_name', COALESCE(current_setting('{HOME_NAME}', true), ''), false)"
)


#: After the unlock, in the same statement: the connection goes back to the warm set holding
#: nothing. A target list is evaluated left to right, so the unlock's own answer comes first.
UNLOCK_ALL = "pg_advisory_unlock_all()"


def unlock(key: LockKey) -> Statement:
    """Release a session lock, then any other session lock of this backend, and name the
    connection as it was opened; the first column is false when this backend did not hold the
    key."""
    return f"SELECT pg_advisory_unlock({key.sql}), {UNLOCK_ALL}, {RENAME_BACK}", key.params


def unlock_one(key: LockKey) -> Statement:
    """Release one session lock of a connection that holds others; false when not held."""
    return f"SELECT pg_advisory_unlock({key.sql})", key.params


def release_lock(key: LockKey, scope: ResolvedScope, *, shared: bool = False) -> Statement | None:
    """Release a taken lock with nothing to record: in session scope ``unlock`` (``unlock_one``
    on a connection ``shared`` with other holders); in transaction scope nothing to send, the
    commit ends the lock."""
    if scope == "transaction":
        return None
    return unlock_one(key) if shared else unlock(key)


def _keys(keys: Sequence[LockKey]) -> dict[str, list[Any]]:
    """The keys of a statement over ``unnest``: the two-int form's ints, or a ``hashtext``
    key's name (``KEY_COLUMNS``, ``LOCK_ARGS``)."""
    columns: dict[str, list[Any]] = {"classids": [], "objids": [], "hashed": []}
    for key in keys:
        ints = key.mode == "sha256"
        columns["classids"].append(key.namespace if ints else None)
        columns["objids"].append(key.objid if ints else None)
        columns["hashed"].append(None if ints else key.name)
    return columns


#: The columns ``_keys`` fills, for ``unnest``.
KEY_COLUMNS = "%(classids)s::int[], %(objids)s::int[], %(hashed)s::text[]"


def _lock_call(function: str, row: str) -> str:
    """``function`` (a lock function) on the key of the ``unnest`` row ``row``."""
    return (
        f"CASE WHEN {row}.hashed IS NULL THEN {function}({row}.classid, {row}.objid) "
        f"ELSE {function}(hashtext({row}.hashed)) END"
    )


def _held(row: str) -> str:
    """Whether this backend holds the key of the ``unnest`` row ``row`` exclusively, as
    ``pg_locks`` shows it: the two-int form as two unsigned oids (``objsubid`` 2), the
    one-bigint form of ``hashtext`` split into two (``objsubid`` 1)."""
    two_int = f"{row}.hashed IS NULL"
    bigint = f"hashtext({row}.hashed)::bigint"
    return f"""EXISTS (SELECT 1 FROM ({ADVISORY_LOCKS}) AS l
     WHERE granted AND mode = 'ExclusiveLock' AND pid = pg_backend_pid()
       AND objsubid = CASE WHEN {two_int} THEN 2 ELSE 1 END
       AND classid::bigint = CASE WHEN {two_int} THEN {row}.classid::bigint & 4294967295
                                  ELSE ({bigint} >> 32) & 4294967295 END
       AND objid::bigint = CASE WHEN {two_int} THEN {row}.objid::bigint & 4294967295
                                ELSE {bigint} & 4294967295 END)"""


def lock_held(key: LockKey) -> Statement:
    """Whether this connection's backend still holds ``key``; one boolean column."""
    return f"SELECT {_held('k')} FROM unnest({KEY_COLUMNS}) AS k(classid, objid, hashed)", _keys(
        [key]
    )


def backend_pid() -> Statement:
    return "SELECT pg_backend_pid()", {}


def in_recovery() -> Statement:
    """Whether the server is a standby, asked when its login said so (a pooler may repeat a
    login parameter of its own first server connection, from before a promotion)."""
    return "SELECT pg_is_in_recovery()", {}


def synchronous_standby_names() -> Statement:
    """The standbys the server waits for when a commit asks (empty: none)."""
    return "SELECT current_setting('synchronous_standby_names')", {}


def usable_connections() -> Statement:
    """How many connections the server gives ordinary roles: ``max_connections`` less the
    reserved ones (``reserved_connections`` exists from PostgreSQL 16)."""
    return (
        "SELECT current_setting('max_connections')::int "
        "- current_setting('superuser_reserved_connections')::int "
        "- COALESCE(current_setting('reserved_connections', true), '0')::int",
        {},
    )


def database_now() -> Statement:
    """The database server's clock, on which ticks are judged."""
    return "SELECT now()", {}


# -- the run row -----------------------------------------------------------------------------

#: Pieces of the claiming statement, filled in by ``_run_parts``.
_PARTS = {
    # Why a job is paused, for its skip row and its log line (a ``{state}`` row).
    "PAUSED_WHY": (
        "concat('paused', ' by ' || NULLIF(paused_by, ''), ' until ' || "
        "to_char(paused_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
        "': ' || NULLIF(reason, ''))"
    ),
    # A pause that holds now.
    "PAUSED_NOW": "paused AND (paused_until IS NULL OR paused_until > clock_timestamp())",
    "DEAD_ERROR": (
        "'the process running it died without finishing; found by host ' "
        "|| %(host)s || ' pid ' || %(pid)s"
    ),
    "STILL_ALIVE": "'an earlier run is still alive (its lease has not expired)'",
    # A row whose body may still be running, whatever its status: its lease has not expired.
    # A ``running`` row renews it; a ``lock_lost`` row keeps the lease it had when its lock was
    # lost (nobody renews it) until it expires or the body ends; every statement that records
    # a body's end clears it (``_FINISH``).
    "BODY_MAY_RUN": "lease_until >= clock_timestamp()",
}


def _waited(synchronous_commit: str | None) -> str:
    """A ``RETURNING`` item that makes the commit of the statement's transaction wait for a
    synchronous standby as ``synchronous_commit`` says (``set_config(..., true)``: this
    transaction only, never the job's own work on other connections). It is evaluated for each
    row the statement writes, so a statement that writes nothing waits for nothing."""
    if synchronous_commit is None:
        return ""
    return ", set_config('synchronous_commit', %(synchronous_commit)s, true)"


@functools.cache
def _run_parts(sql: str) -> str:
    for name, text in _PARTS.items():
        sql = sql.replace(name, text)
    return sql


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
    interrupted, live, paused)``:

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

    A replica that loses a tick writes nothing: its whole cost is this round trip. Skips are
    written here, as rows, only with ``record_skips`` and for manual runs (an operator's
    request, one per request, is told what became of it): on the ``final`` attempt for a lock
    held elsewhere or a paused job (``skipped_locked``, ``skipped_paused``), and for a tick
    found taken when it is ``settle``d (``skipped_tick``; otherwise that row is the
    release's: ``skip_tick``).

    ``lease`` is NULL for transaction scope: the row is invisible until the run commits.
    ``synchronous_commit`` (``SYNCHRONOUS_COMMIT``) makes a written claim wait for a
    synchronous standby (see ``_waited``), so that a failover does not lose it.

    With ``census`` (a worker's claims), each row also carries the server's clock (as late in
    the statement as it can be read: a clock taken from it is never ahead), the
    ``application_name`` of every live worker (those starting with ``census``) and whether a
    "run now" request is pending: a worker's clock, its view of the fleet and its look for
    missed requests come with its claims, not in statements of their own.
    """
    assert scope == "session" or not settle, "only a session lock is released on its own"
    lease_sql = "clock_timestamp() + make_interval(secs => %(lease)s)" if lease else "NULL"
    sql = _fill(
        f"""
WITH i AS (
    SELECT * FROM unnest(%(jobs)s::text[], {KEY_COLUMNS}, %(refs)s::timestamptz[],
                         %(manual)s::boolean[], %(task_ids)s::text[], %(once)s::boolean[])
           WITH ORDINALITY AS i(job, classid, objid, hashed, ref, manual, task_id, once, n)
), paused AS (
    SELECT i.n, PAUSED_WHY AS why FROM i JOIN {{state}} s ON s.job = i.job
     WHERE NOT i.manual AND PAUSED_NOW
), live AS (
    SELECT job, count(*) AS n FROM {{table}}
     WHERE job = ANY(%(jobs)s) AND BODY_MAY_RUN GROUP BY job
), l AS (
    SELECT i.*, p.why, COALESCE(v.n, 0) AS live, COALESCE(i.ref, now()) AS reference,
           CASE WHEN p.why IS NOT NULL OR v.n IS NOT NULL THEN false
                ELSE {_lock_call(TRY_LOCK[scope], "i")} END AS got
      FROM i LEFT JOIN paused p USING (n) LEFT JOIN live v USING (job)
), t AS (
    SELECT l.*,
           (SELECT c.tick FROM unnest(%(match_n)s::bigint[], %(match_at)s::timestamptz[],
                                      %(match_tick)s::timestamptz[]) AS c(n, at, tick)
             WHERE c.n = l.n AND abs(extract(epoch FROM c.at - l.reference)) <= %(skew)s
             ORDER BY abs(extract(epoch FROM c.at - l.reference)) LIMIT 1) AS tick
      FROM l
), dead AS (
    UPDATE {{table}} r SET status = {{s_interrupted}}, finished = clock_timestamp(),
           error = DEAD_ERROR, lease_until = NULL
      FROM t
     WHERE r.job = ANY(%(jobs)s) AND r.job = t.job AND t.got AND r.status = {{s_running}}
       AND (r.lease_until IS NULL OR r.lease_until < clock_timestamp())
    RETURNING r.job
), ins AS (
    INSERT INTO {{table}} (job, tick, host, pid, started, status, error, lease_until, manual,
                         task_id)
    SELECT t.job, t.tick, %(host)s, %(pid)s, clock_timestamp(), {{s_running}}, '', LEASE,
           t.manual, t.task_id
      FROM t WHERE t.got AND NOT (t.once AND EXISTS (
        SELECT FROM {{table}} r WHERE r.job = t.job AND r.tick = t.tick
           AND r.status IN ({{s_interrupted}}, {{s_running}})))
    ON CONFLICT (job, tick) WHERE status IN ({{taking}}) DO NOTHING
    RETURNING id, job{_waited(synchronous_commit)}
), o AS (
    SELECT t.*, ins.id, d.interrupted,
           %(settle)s AND t.got AND ins.id IS NULL AND (d.interrupted = 0 OR t.once)
               AS settled
      FROM t LEFT JOIN ins USING (job)
     CROSS JOIN LATERAL (SELECT count(*) AS interrupted FROM dead WHERE dead.job = t.job) d
)SKIPS
SELECT CASE WHEN o.settled THEN {_lock_call("pg_advisory_unlock", "o")} ELSE false END,
       o.got, o.id, o.tick, o.reference, o.interrupted, o.live, o.why CENSUS
  FROM o ORDER BY o.n
"""
    )
    numbered = [(n, match) for n, claim in enumerate(claims, 1) for match in claim.matches]
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
        "lease": lease,
        "final": final,
        "settle": settle,
        "record": record_skips,
        "prefix": census,
        "synchronous_commit": synchronous_commit,
    }
    skips = _skip_rows() if record_skips or any(claim.manual for claim in claims) else ""
    fleet = f", {_fill(_SIGHTING)}" if census else ""
    sql = _run_parts(sql).replace("LEASE", lease_sql)
    return sql.replace("SKIPS", skips).replace("CENSUS", fleet), params


@functools.cache
def _skip_rows() -> str:
    """The part of ``claim_runs`` that records skips, with ``record_skips`` only."""
    return _run_parts(
        _fill(
            """, skip AS (
    INSERT INTO {table} (job, tick, host, pid, started, finished, status, error, manual,
                         task_id)
    SELECT o.job, o.tick, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
           CASE WHEN o.got THEN {s_skipped_tick}
                WHEN o.why IS NOT NULL THEN {s_skipped_paused} ELSE {s_skipped_locked} END,
           COALESCE(o.why, CASE WHEN o.live > 0 THEN STILL_ALIVE ELSE '' END),
           o.manual, o.task_id
      FROM o WHERE ((NOT o.got AND %(final)s) OR o.settled) AND (%(record)s OR o.manual)
)"""
        )
    )


#: What PostgreSQL text cannot hold: NUL, and unpaired surrogates (what ``os.fsdecode`` makes
#: of a byte that is not UTF-8), which the driver cannot encode.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` as a run row can hold it: each NUL and each unpaired surrogate becomes U+FFFD
    (the same length, so bounded output stays bounded; idempotent). Every text a run's row is
    written with goes through it, so no job's output or error can make the row's statement
    fail."""
    return _UNSTORABLE.sub("\ufffd", text)


def _who(job: str, host: str, pid: int, task_id: str = "") -> dict[str, Any]:
    return {"job": job, "host": storable(host), "pid": pid, "task_id": storable(task_id)}


def renew_leases(runs: Sequence[tuple[int, LockKey]], *, lease: float) -> Statement:
    """The heartbeat of one run, or of the runs claimed together on one connection: renew the
    lease of each run whose lock this backend still holds, in one round trip. One boolean row
    per run, in order: its lock is held and its lease renewed (false: it lost its lock). Only
    ``running`` rows are renewed: a ``lock_lost`` row keeps the lease it had, which runs out."""
    sql = _fill(
        f"""
WITH h AS (
    SELECT k.n, k.id, {_held("k")} AS held
      FROM unnest(%(ids)s::bigint[], {KEY_COLUMNS})
           WITH ORDINALITY AS k(id, classid, objid, hashed, n)
), r AS (
    UPDATE {{table}} SET lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
     WHERE id IN (SELECT id FROM h WHERE held) AND status = {{s_running}}
    RETURNING id
)
SELECT h.held AND h.id IN (SELECT id FROM r) FROM h ORDER BY h.n"""
    )
    params = {
        "ids": [run for run, _key in runs],
        **_keys([key for _run, key in runs]),
        "lease": lease,
    }
    return sql, params


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
    lease_sql = "clock_timestamp() + make_interval(secs => %(lease)s)" if lease else "NULL"
    sql = _fill(
        """
INSERT INTO {table} (job, tick, host, pid, started, status, error, lease_until, task_id)
VALUES (%(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), {s_running}, '', LEASE,
        %(task_id)s)
ON CONFLICT (job, tick) WHERE status IN ({taking}) DO NOTHING
RETURNING idWAITED"""
    ).replace("LEASE", lease_sql)
    params = {"tick": tick, "lease": lease, "synchronous_commit": synchronous_commit}
    return sql.replace("WAITED", _waited(synchronous_commit)), {
        **_who(job, host, pid, task_id),
        **params,
    }


def _then_unlock(inner: str, key: LockKey, scope: ResolvedScope, shared: bool = False) -> str:
    """Run ``inner`` (a data-modifying statement) and, in session scope, unlock (then unlock
    everything, see ``UNLOCK_ALL``, unless the connection is ``shared`` by other holders) in
    the same round trip; the first column is the unlock's result (``true`` in transaction
    scope)."""
    if scope == "session":
        rest = "" if shared else f", {UNLOCK_ALL}"
        return f"WITH w AS ({inner}) SELECT pg_advisory_unlock({key.sql}){rest}"
    return f"WITH w AS ({inner}) SELECT true"


#: How a run's end is written on its row: ``status``, unless another holder already closed
#: it; its end; its lease ended, so the job is not held back any longer; ``error`` appended.
_FINISH = """
    status = CASE WHEN status IN ({s_running}, {s_lock_lost}) THEN %(status)s ELSE status END,
    finished = CASE WHEN status IN ({s_running}, {s_lock_lost}) OR finished IS NULL
                    THEN clock_timestamp() ELSE finished END,
    lease_until = NULL,
    error = CASE WHEN error = '' THEN %(error)s
                 WHEN %(error)s = '' THEN error
                 ELSE error || E'\\n' || %(error)s END"""


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
    update = _fill(
        "UPDATE {table} SET"
        + _FINISH
        + ", attempts = %(attempts)s, output = %(output)s WHERE id = %(id)s"
    ) + (f" RETURNING id{_waited(synchronous_commit)}" if synchronous_commit else "")
    params = {
        **key.params,
        "status": status,
        "error": storable(error),
        "id": run_id,
        "attempts": attempts,
        "output": storable(output),
        "synchronous_commit": synchronous_commit,
    }
    return _then_unlock(update, key, scope, shared), params


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
    insert = _fill(
        "INSERT INTO {table} (job, tick, host, pid, started, finished, status, error, task_id) "
        "VALUES (%(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(), "
        "{s_skipped_tick}, '', %(task_id)s)"
    )
    who = _who(job, host, pid, task_id)
    return _then_unlock(insert, key, scope, shared), {**key.params, **who, "tick": tick}


#: The row of a run written through another connection than its own: its id, and who wrote
#: it. After a failover to an asynchronous standby, the id may have been given to another
#: run (the claim that took it was lost, and the sequence with it).
_OWN_ROW = "id = %(id)s AND job = %(job)s AND host = %(host)s AND pid = %(pid)s"


def mark_lock_lost(*, run_id: int, job: str, host: str, pid: int, error: str) -> Statement:
    """Mark a running run ``lock_lost`` as soon as the loss is seen. Its lease is kept, not
    renewed: its body may still run, and the other replicas wait for the lease to run out
    (or for ``record_lost_run``, when the body ends) before they start the job again."""
    sql = _fill(
        "UPDATE {table} SET status = {s_lock_lost}, error = %(error)s "
        f"WHERE {_OWN_ROW} AND status = {{s_running}}"
    )
    return sql, {**_who(job, host, pid), "id": run_id, "error": storable(error)}


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
    row that rolled back
    with its lost connection (transaction scope: ``run_id`` is gone, or was never known) is
    written again: its tick stays taken (``lock_lost`` and ``failed`` take it) unless another
    replica already ran it, in which case this row is kept without a tick, so the history
    still shows it."""
    sql = _fill(
        """
WITH upd AS (
    UPDATE {table} SET
    attempts = CASE WHEN status IN ({s_running}, {s_lock_lost}) THEN %(attempts)s
                    ELSE attempts END,
    output = CASE WHEN status IN ({s_running}, {s_lock_lost}) THEN %(output)s
                  ELSE output END,"""
        + _FINISH
        + """
     WHERE OWN_ROW
    RETURNING id
), ins AS (
    INSERT INTO {table} (job, tick, host, pid, started, finished, status, error, attempts,
                         output, task_id)
    SELECT %(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
           %(status)s, %(error)s, %(attempts)s, %(output)s, %(task_id)s
     WHERE NOT EXISTS (SELECT 1 FROM upd)
    ON CONFLICT (job, tick) WHERE status IN ({taking}) DO NOTHING
    RETURNING id
)
INSERT INTO {table} (job, tick, host, pid, started, finished, status, error, attempts, output,
                     task_id)
SELECT %(job)s, NULL, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(), %(status)s,
       %(error)s || E'\\n(tick ' || %(tick)s::text || ' was run by another replica)',
       %(attempts)s, %(output)s, %(task_id)s
 WHERE NOT EXISTS (SELECT 1 FROM upd) AND NOT EXISTS (SELECT 1 FROM ins)"""
    ).replace("OWN_ROW", _OWN_ROW)
    who = _who(job, host, pid, task_id)
    return sql, {
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
    sql = _fill("UPDATE {table} SET status = {s_failed}, error = %(error)s WHERE id = %(id)s")
    return sql, {"id": run_id, "error": storable(error)}


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
    sql = _fill(
        _run_parts(
            """
WITH p AS (SELECT PAUSED_WHY AS why FROM {state} WHERE job = %(job)s AND PAUSED_NOW),
ins AS (
    INSERT INTO {claims} (job, tick, backend, task_id, host, pid, enqueued)
    SELECT %(job)s, %(tick)s, %(backend)s, '', %(host)s, %(pid)s, clock_timestamp()
     WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE job = %(job)s AND tick = %(tick)s
                          AND status IN ({taking}))
       AND NOT EXISTS (SELECT 1 FROM p)
    ON CONFLICT (job, tick) DO NOTHING
    RETURNING id, enqueued
), old AS (
    DELETE FROM {claims}
     WHERE job = %(job)s AND tick < %(tick)s::timestamptz - make_interval(days => %(keep)s)
       AND EXISTS (SELECT 1 FROM ins)
), run AS (
    INSERT INTO {table} (job, tick, host, pid, started, status, error, lease_until)
    SELECT %(job)s, %(tick)s, %(host)s, %(pid)s, enqueued, {s_running}, '',
           clock_timestamp() + make_interval(secs => %(lease)s::float8)
      FROM ins WHERE %(record)s
    ON CONFLICT (job, tick) WHERE status IN ({taking}) DO NOTHING
    RETURNING id
), dead AS (
    -- A run of the tick other than the send's own (written with the claim, from its time) is
    -- its task's: the enqueue went through.
    INSERT INTO {table} AS r (job, tick, host, pid, started, finished, status, error)
    SELECT c.job, c.tick, c.host, c.pid, c.enqueued, clock_timestamp(), {s_failed},
           'its sender (host ' || c.host || ' pid ' || c.pid || ') died waiting for '
           || c.backend || ': ' || %(unsure)s || '; found by host ' || %(host)s
           || ' pid ' || %(pid)s
      FROM {claims} c
     WHERE %(lease)s::float8 IS NOT NULL AND c.job = %(job)s AND c.task_id = ''
       AND c.enqueued < clock_timestamp() - make_interval(secs => %(lease)s::float8)
       AND NOT EXISTS (SELECT 1 FROM {table} WHERE job = c.job AND tick = c.tick
                          AND started <> c.enqueued)
    ON CONFLICT (job, tick) WHERE status IN ({taking}) DO UPDATE
       SET status = EXCLUDED.status, finished = EXCLUDED.finished, error = EXCLUDED.error,
           lease_until = NULL
     WHERE r.status = {s_running}
    RETURNING r.id, r.tick, r.error
)
SELECT (SELECT id FROM ins),
       EXISTS (SELECT 1 FROM {table} WHERE job = %(job)s AND tick = %(tick)s
                  AND status IN ({taking})
                  AND NOT (%(record)s AND status = {s_running})),
       (SELECT why FROM p),
       (SELECT id FROM run),
       (SELECT json_agg(json_build_array(id, tick, error) ORDER BY tick) FROM dead)"""
        )
    )
    params = {
        **_who(job, host, pid),
        "tick": tick,
        "backend": backend,
        "keep": keep_days,
        "lease": lease,
        "record": record,
        "unsure": unsure,
    }
    return sql, params


def enqueued(*, claim_id: int, task_id: str, run_id: int | None = None) -> Statement:
    """Store the task result id the backend returned on the claim, and on the tick's run
    ``run_id`` (written at the claim) if any: succeeded (sent) with it, until now, whatever
    became of it meanwhile (a sender slower than its lease, found dead, was not). One row
    ``(run id,)`` then."""
    params = {"id": claim_id, "task_id": storable(task_id), "run": run_id}
    if run_id is None:
        return _fill("UPDATE {claims} SET task_id = %(task_id)s WHERE id = %(id)s"), params
    sql = _fill(
        """
WITH claim AS (UPDATE {claims} SET task_id = %(task_id)s WHERE id = %(id)s)
UPDATE {table} SET status = {s_succeeded}, finished = clock_timestamp(), lease_until = NULL,
       error = '', task_id = %(task_id)s
 WHERE id = %(run)s
RETURNING id"""
    )
    return sql, params


def release_claim(*, claim_id: int) -> Statement:
    """Give the claim back after a failed enqueue, so the tick can be enqueued again."""
    return _fill("DELETE FROM {claims} WHERE id = %(id)s"), {"id": claim_id}


def refused_send(*, claim_id: int, run_id: int | None, error: str) -> Statement:
    """Record a claimed tick whose message the queue refused: its run ``run_id`` (written at
    the claim) failed, with ``error`` (the claim goes: the failed run takes the tick). One row
    ``(run id,)``, none without a run (the tick had one already)."""
    sql = _fill(
        """
WITH claim AS (DELETE FROM {claims} WHERE id = %(id)s)
UPDATE {table} SET status = {s_failed}, finished = clock_timestamp(), lease_until = NULL,
       error = %(error)s
 WHERE id = %(run)s
RETURNING id"""
    )
    return sql, {"id": claim_id, "run": run_id, "error": storable(error)}


def unclaimed_send(
    *, job: str, host: str, pid: int, started: datetime, manual: bool, task_id: str, error: str
) -> Statement:
    """Record a send that claimed no tick (a manual run, or one off the schedule) as its run,
    with no tick: succeeded with the queue's ``task_id``, or failed with ``error``. One row
    ``(run id,)``."""
    sql = _fill(
        """
INSERT INTO {table} (job, tick, host, pid, started, finished, status, error, task_id, manual)
VALUES (%(job)s, NULL, %(host)s, %(pid)s, %(started)s, clock_timestamp(),
        CASE WHEN %(error)s = '' THEN {s_succeeded} ELSE {s_failed} END, %(error)s,
        %(task_id)s, %(manual)s)
RETURNING id"""
    )
    return sql, {
        **_who(job, host, pid, task_id),
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
    sql = _fill(
        """
INSERT INTO {table} (job, tick, host, pid, started, finished, status, error)
VALUES (%(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
        {s_skipped_locked},
        COALESCE('its previous run (run ' || (SELECT id FROM {table}
                   WHERE job = %(job)s AND lease_until IS NOT NULL AND finished IS NULL
                   ORDER BY started DESC LIMIT 1) || ') is still running', %(otherwise)s))
RETURNING error"""
    )
    return sql, {**_who(job, host, pid), "tick": tick, "otherwise": storable(otherwise)}


_CHILD_ROW = (
    "SELECT id, status FROM {table} WHERE job = %(job)s AND host = %(host)s "
    "AND pid = %(pid)s AND tick IS NOT DISTINCT FROM %(tick)s ORDER BY id DESC LIMIT 1"
)


def child_run(*, job: str, host: str, pid: int, tick: datetime | None) -> Statement:
    """The latest row a worker's child process wrote for ``tick``: ``(id, status)``."""
    return _fill(_CHILD_ROW), {**_who(job, host, pid), "tick": tick}


def finish_child_run(
    *, job: str, host: str, pid: int, tick: datetime | None, status: str, error: str
) -> Statement:
    """Finish the run of a worker's child process that was killed: its row, if still
    ``running`` (or ``lock_lost``), gets ``status``; if the process left no row for the tick
    (a transaction-scoped row rolls back with its connection), one is inserted. A row the
    process finished itself is kept as it is."""
    sql = _fill(
        f"WITH mine AS ({_CHILD_ROW}), upd AS (UPDATE {{table}} SET"
        + _FINISH
        + """
     WHERE id = (SELECT id FROM mine) AND status IN ({s_running}, {s_lock_lost})
)
INSERT INTO {table} (job, tick, host, pid, started, finished, status, error)
SELECT %(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
       %(status)s, %(error)s
 WHERE NOT EXISTS (SELECT 1 FROM mine)
ON CONFLICT (job, tick) WHERE status IN ({taking}) DO NOTHING"""
    )
    return sql, {**_who(job, host, pid), "tick": tick, "status": status, "error": storable(error)}


# -- pause, resume, run now -------------------------------------------------------------------

#: The channel "run now" requests are announced on (the payload is the job's name).
RUN_CHANNEL = "django_advisory_cron_run"


def request_run(*, job: str, by: str) -> Statement:
    """Record a "run now" request and wake the workers that LISTEN, in one statement (the
    notification goes out when it commits). A request still pending is kept, not doubled.
    One column: when the pending request was made."""
    sql = _fill(
        """
WITH req AS (
    INSERT INTO {state} (job, paused, paused_by, reason, run_requested, run_requested_by, changed)
    VALUES (%(job)s, false, '', '', now(), %(by)s, now())
    ON CONFLICT (job) DO UPDATE
       SET run_requested = COALESCE({state}.run_requested, EXCLUDED.run_requested),
           run_requested_by = CASE WHEN {state}.run_requested IS NULL
                                   THEN EXCLUDED.run_requested_by
                                   ELSE {state}.run_requested_by END,
           changed = now()
    RETURNING run_requested
)
SELECT run_requested, pg_notify(%(channel)s, %(job)s) FROM req"""
    )
    return sql, {"job": job, "by": by, "channel": RUN_CHANNEL}


def claim_run_requests(jobs: list[str]) -> Statement:
    """Take the pending "run now" requests of ``jobs``: each is returned to one worker only
    (a concurrent claim waits for the row, then finds it taken). Rows: job, when, by whom."""
    # RETURNING gives the new row: the request's time and author are read before the update.
    sql = _fill(
        """
WITH taken AS (
    SELECT job, run_requested, run_requested_by FROM {state}
     WHERE job = ANY(%(jobs)s) AND run_requested IS NOT NULL
       FOR UPDATE
)
UPDATE {state} s SET run_requested = NULL, run_requested_by = '', changed = now()
  FROM taken WHERE s.job = taken.job
RETURNING taken.job, taken.run_requested, taken.run_requested_by"""
    )
    return sql, {"jobs": list(jobs)}


def latest_recorded_ticks(jobs: list[str]) -> Statement:
    """The latest tick each of ``jobs`` has a row for, whatever its status: rows ``(job,
    tick)``, one per job, ``tick`` NULL for a job with no recorded tick.

    Every recorded tick counts, skips included: a tick skipped because the previous run was
    still going was decided, not missed. Two index scans per job, never the whole history:
    the greatest tick among the rows that take a tick (the partial unique index on ``(job,
    tick)``), and the tick of the most recently started row that has one (the ``(job,
    started)`` index), which is where a later skip would be. A pause decides every tick up to
    its end (``now()`` while it lasts), though its skips leave no row: a job resumes with its
    next tick. So does a reset of its override, for a job with a tick or a pause (the
    override's ``changed`` anchored catch-up until the reset deleted it).

    Pruning keeps both rows of every job (``JobRun.objects.prunable``): they are what the
    once-per-tick and catch-up rules read, so a worker's next start never finds a tick it
    ran missing.
    """
    sql = _fill(
        """
SELECT j.job, GREATEST(r.latest, CASE WHEN r.latest IS NOT NULL THEN s.schedule_reset END)
  FROM unnest(%(jobs)s::text[]) AS j(job)
  LEFT JOIN {state} s ON s.job = j.job
  CROSS JOIN LATERAL (SELECT GREATEST(
    (SELECT tick FROM {table} WHERE job = j.job AND status IN ({taking}) AND tick IS NOT NULL
      ORDER BY tick DESC LIMIT 1),
    (SELECT tick FROM {table} WHERE job = j.job AND tick IS NOT NULL
      ORDER BY started DESC LIMIT 1),
    CASE WHEN s.paused_at IS NULL THEN NULL
         WHEN PAUSED_NOW THEN now() ELSE s.paused_until END) AS latest) r"""
    )
    return _run_parts(sql), {"jobs": list(jobs)}


#: Where the database's schedules announce a change (their table's trigger, migration 0010).
SCHEDULES_CHANNEL = "django_advisory_cron_schedules"


def listen() -> list[Statement]:
    """Subscribe this session to "run now" announcements and to changes of the database's
    schedules (needs a direct connection)."""
    return [(f"LISTEN {channel}", {}) for channel in (RUN_CHANNEL, SCHEDULES_CHANNEL)]


# -- the pooling probe and the admin --------------------------------------------------------


#: The sessions of live ``cronworker`` processes: their ``application_name`` starts with
#: ``%(prefix)s``.
_LIVE_WORKERS = (
    "FROM pg_stat_activity "
    "WHERE datname = current_database() AND starts_with(application_name, %(prefix)s)"
)


#: The version of the schedules kept in the database: any write or delete changes it.
_SCHEDULES_VERSION = "(SELECT count(*) || ' ' || COALESCE(max(changed)::text, '') FROM {schedules})"

#: What a worker's claim also reads (see ``claim_runs``): the server's clock, the live
#: workers, whether a "run now" request is pending, the version of the database's schedules.
_SIGHTING = (
    f"clock_timestamp(), (SELECT array_agg(application_name) {_LIVE_WORKERS}), "
    "EXISTS (SELECT FROM {state} WHERE run_requested IS NOT NULL), "
    f"{_SCHEDULES_VERSION}"
)

#: The columns of a schedule kept in the database, in the order ``schedule_rows`` reads them.
SCHEDULE_COLUMNS = (
    "name",
    "override",
    "job",
    "command",
    "args",
    "kwargs",
    "cron",
    "every",
    "timezone",
    "enabled",
    "catch_up",
    "max_lateness",
    "timeout",
    "deliver",
    "description",
    "starts",
    "ends",
    "retries",
    "retry_backoff",
    "at_most_once",
    "capture",
    "changed",
)


#: A schedule's times that Python can hold (a day inside its years 1 to 9999, for any zone):
#: the database takes more (``'infinity'``, the year 200000), which the driver cannot read.
_READABLE_TIME = "BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00'"
_TIME_COLUMNS = ("starts", "ends", "changed")


def schedule_rows() -> Statement:
    """Every schedule kept in the database, and the version they make (the same as a
    sighting's), read together: ``SCHEDULE_COLUMNS``, the names of its times Python cannot
    hold (read as ``NULL``; ``''``: none), then the version, one row each; a single row of
    ``NULL`` columns and the version when there is none."""
    columns = ", ".join(
        f"CASE WHEN s.{column} {_READABLE_TIME} THEN s.{column} END"
        if column in _TIME_COLUMNS
        else f"s.{column}"
        for column in SCHEDULE_COLUMNS
    )
    unreadable = ", ".join(
        f"CASE WHEN NOT s.{column} {_READABLE_TIME} THEN '{column}' END" for column in _TIME_COLUMNS
    )
    return (
        _fill(
            f"SELECT {columns}, concat_ws(' and ', {unreadable}), v.version "
            f"FROM (SELECT {_SCHEDULES_VERSION} AS version) v "
            "LEFT JOIN {schedules} s ON true ORDER BY s.name"
        ),
        {},
    )


def sighting(prefix: str) -> Statement:
    """What a worker's claim reads besides its runs (see ``claim_runs``), alone: for a
    worker that has not claimed for a while."""
    return f"SELECT {_fill(_SIGHTING)}", {"prefix": prefix}


def live_workers(prefix: str) -> Statement:
    """The sessions of live ``cronworker`` processes (their ``application_name`` starts with
    ``prefix``), oldest first: ``(application_name, backend_start, client_addr)``."""
    return (
        f"SELECT application_name, backend_start, client_addr {_LIVE_WORKERS} "
        "ORDER BY backend_start",
        {"prefix": prefix},
    )


def probe_lock(key: LockKey) -> str:
    """Client A of the pooling probe: its backend pid and a shared lock on the probe key.

    Literal values (the probe speaks the simple query protocol)."""
    return f"SELECT pg_backend_pid(), pg_try_advisory_lock_shared({key.namespace}, {key.objid})"


def probe_still_held(pid: int, ids: tuple[int, int, int]) -> str:
    """Client B of the pooling probe: is client A's shared lock still held by its backend?"""
    classid, objid, objsubid = ids
    return (
        f"SELECT count(*) FROM ({ADVISORY_LOCKS}) AS l WHERE granted AND pid = {int(pid)} "
        f"AND classid = {int(classid)} AND objid = {int(objid)} AND objsubid = {int(objsubid)}"
    )


def terminate_holders(pids: list[int]) -> Statement:
    """Terminate the backends among ``pids`` that hold an advisory lock now (never our own);
    checking and terminating in one statement, so a pid reused since is refused."""
    sql = (
        "SELECT holder.pid, pg_terminate_backend(holder.pid) FROM (SELECT DISTINCT pid "
        f"FROM ({ADVISORY_LOCKS}) AS l WHERE granted AND pid = ANY(%(pids)s) "
        "AND pid <> pg_backend_pid()) AS holder"
    )
    return sql, {"pids": list(pids)}


# -- the read side: health, metrics, charts -----------------------------------------------------

#: The columns of a run row the read side loads (everything but the lease and task fields).
RUN_COLUMNS = (
    "id",
    "job",
    "tick",
    "host",
    "pid",
    "started",
    "finished",
    "status",
    "error",
    "manual",
)


def job_summaries(jobs: list[str], *, skips: list[str], since: datetime | None) -> Statement:
    """For each job in ``jobs``, in one statement: its last run that was not a skip, the
    start of its last success, and (with ``since``) its runs per status started since then.

    Each row is the job name, the last run's ``RUN_COLUMNS`` (NULLs when it never ran), the
    last success and a JSON object of counts as text (NULL without ``since``). The last run
    walks the ``(job, started)`` index past the skips after it (in its order, so no other index
    is cheaper); the last success is one descent of ``(job, status, started, id)``, however
    long ago it was (a job that has failed for weeks included); the counts walk ``(job,
    started)`` over the window. The cost follows the number of jobs and the runs inside the
    window, not the history's size.
    """
    columns = ", ".join(f"r.{column}" for column in RUN_COLUMNS[1:])
    sql = _fill(
        f"""
SELECT j.job, r.id, {columns}, s.started, c.counts
FROM unnest(%(jobs)s::text[]) AS j(job)
LEFT JOIN LATERAL (
    SELECT * FROM {{table}} AS t WHERE t.job = j.job AND t.status <> ALL(%(skips)s::text[])
    ORDER BY t.started DESC LIMIT 1
) AS r ON true
LEFT JOIN LATERAL (
    SELECT t.started FROM {{table}} AS t WHERE t.job = j.job AND t.status = {{s_succeeded}}
    ORDER BY t.started DESC LIMIT 1
) AS s ON true
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(g.status, g.runs)::text AS counts FROM (
        SELECT t.status, count(*) AS runs FROM {{table}} AS t
        WHERE %(since)s::timestamptz IS NOT NULL AND t.job = j.job
          AND t.started >= %(since)s::timestamptz
        GROUP BY t.status
    ) AS g
) AS c ON true
ORDER BY j.job"""
    )
    return sql, {"jobs": list(jobs), "skips": list(skips), "since": since}


def recent_runs(jobs: list[str], *, skips: list[str], limit: int) -> Statement:
    """The last ``limit`` runs of each job that were not skips, newest first within a job:
    ``(job, tick, host, pid, status, seconds)``, the seconds it ran (so far, for a running
    one) computed here, so a page of run charts converts no start and end times."""
    sql = _fill(
        """
SELECT r.job, r.tick, r.host, r.pid, r.status,
       extract(epoch FROM COALESCE(r.finished,
                                   CASE WHEN r.status = {s_running} THEN now() ELSE r.started END)
                          - r.started)::float8
FROM unnest(%(jobs)s::text[]) AS j(job)
CROSS JOIN LATERAL (
    SELECT * FROM {table} AS t WHERE t.job = j.job AND t.status <> ALL(%(skips)s::text[])
    ORDER BY t.started DESC, t.id DESC LIMIT %(limit)s
) AS r
ORDER BY r.job, r.started DESC, r.id DESC"""
    )
    return sql, {"jobs": list(jobs), "skips": list(skips), "limit": limit}


def failures_in_a_row(*, job: str, run_id: int, failing: list[str], limit: int | None) -> Statement:
    """How many runs of ``job`` ended in one of ``failing`` since its last success before its
    run ``run_id``, that run included, counted up to ``limit`` (``None``: all). Two ranges of
    ``(job, status, started, id)``: one row for the last success, then the failures since it,
    so the cost follows the streak (about 1 ms per 1,000 failures), not the history. Runs
    started after the run do not count, so the answer does not depend on when it is read."""
    sql = _fill(
        """
WITH this AS (SELECT started, id FROM {table} WHERE id = %(run_id)s AND job = %(job)s),
last_success AS (
    SELECT s.started, s.id FROM {table} AS s, this
     WHERE s.job = %(job)s AND s.status = {s_succeeded}
       AND (s.started, s.id) < (this.started, this.id)
     ORDER BY s.started DESC, s.id DESC LIMIT 1)
SELECT count(*) FROM (
    SELECT 1 FROM {table} AS r, this
     WHERE r.job = %(job)s AND r.status = ANY(%(failing)s::text[])
       AND (r.started, r.id) <= (this.started, this.id)
       AND r.started >= COALESCE((SELECT started FROM last_success), '-infinity')
       AND NOT EXISTS (SELECT 1 FROM last_success AS l WHERE (l.started, l.id) >= (r.started, r.id))
     ORDER BY r.started DESC, r.id DESC LIMIT %(limit)s) AS streak"""
    )
    return sql, {"job": job, "run_id": run_id, "failing": failing, "limit": limit}
