-- Every statement this app writes itself (the ORM's queries aside), literal and named: a
-- statement seen in a server log or in pg_stat_statements is found here as it was sent
-- (psycopg's %(name)s placeholders become $1, $2, ...). Each function of db/sql.py picks its
-- statement by name (claim_runs, enqueued and listen pick one of two) and fills its parameters;
-- create_claim and drop_claim are a migration's (0016).
--
-- Format: a line "-- name: <name>", comment lines saying what it is for, then the statement,
-- up to the next "-- name:" line. The tables and columns are the models' (tests check them),
-- the status values RunStatus's; the parts a call may leave out are guarded by parameters.
-- A lock key is given as %(lock_ns)s, %(lock_id)s (two ints) or %(lock_name)s (hashtext),
-- the other form NULL; several keys as the arrays %(classids)s, %(objids)s, %(hashed)s.


-- name: try_lock_session
-- Try a session lock once; a taken lock names its connection after itself, keeping the name
-- it had in django_advisory_cron.home_name (unlock gives it back). Its connection, a lock's
-- own, plans generically from then on (as the claim function plans its statement).
SELECT got, CASE WHEN got THEN ARRAY[
           set_config('django_advisory_cron.home_name', current_setting('application_name'), false),
           set_config('application_name', %(lock_label)s, false)] END
  FROM (SELECT CASE WHEN %(lock_name)s::text IS NULL
                    THEN pg_try_advisory_lock(%(lock_ns)s, %(lock_id)s)
                    ELSE pg_try_advisory_lock(hashtext(%(lock_name)s)) END AS got) AS t
 WHERE set_config('plan_cache_mode', 'force_generic_plan', false) <> ''

-- name: try_lock_transaction
-- Try a transaction lock once; a taken lock names its connection until the transaction ends.
SELECT got, CASE WHEN got THEN ARRAY[set_config('application_name', %(lock_label)s, true)] END
  FROM (SELECT CASE WHEN %(lock_name)s::text IS NULL
                    THEN pg_try_advisory_xact_lock(%(lock_ns)s, %(lock_id)s)
                    ELSE pg_try_advisory_xact_lock(hashtext(%(lock_name)s)) END AS got) AS t

-- name: unlock
-- Release a session lock, then every other one of this backend, and give the connection back
-- the name try_lock_session kept.
SELECT CASE WHEN %(lock_name)s::text IS NULL THEN pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)
            ELSE pg_advisory_unlock(hashtext(%(lock_name)s)) END,
       pg_advisory_unlock_all(),
       set_config('application_name',
                  COALESCE(current_setting('django_advisory_cron.home_name', true), ''), false)

-- name: unlock_one
-- Release one session lock of a connection that holds others.
SELECT CASE WHEN %(lock_name)s::text IS NULL THEN pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)
            ELSE pg_advisory_unlock(hashtext(%(lock_name)s)) END

-- name: lock_held
-- Whether this backend holds the key exclusively, as pg_locks shows it: the two-int form as
-- two unsigned oids (objsubid 2), hashtext's bigint split in two (objsubid 1).
SELECT EXISTS (
    SELECT 1 FROM (SELECT * FROM pg_locks WHERE locktype = 'advisory'
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS l
     WHERE granted AND mode = 'ExclusiveLock' AND pid = pg_backend_pid()
       AND objsubid = CASE WHEN k.hashed IS NULL THEN 2 ELSE 1 END
       AND classid::bigint = CASE WHEN k.hashed IS NULL THEN k.classid::bigint & 4294967295
                                  ELSE (hashtext(k.hashed)::bigint >> 32) & 4294967295 END
       AND objid::bigint = CASE WHEN k.hashed IS NULL THEN k.objid::bigint & 4294967295
                                ELSE hashtext(k.hashed)::bigint & 4294967295 END)
  FROM unnest(%(classids)s::int[], %(objids)s::int[], %(hashed)s::text[])
       AS k(classid, objid, hashed)

-- name: backend_pid
SELECT pg_backend_pid()

-- name: in_recovery
SELECT pg_is_in_recovery()

-- name: synchronous_standby_names
SELECT current_setting('synchronous_standby_names')

-- name: usable_connections
-- max_connections less the reserved ones (reserved_connections exists from PostgreSQL 16).
SELECT current_setting('max_connections')::int
       - current_setting('superuser_reserved_connections')::int
       - COALESCE(current_setting('reserved_connections', true), '0')::int

-- name: database_now
SELECT now()

-- name: claim_runs
-- Take the locks and claim the ticks of one or several runs, in one round trip (see
-- sql.claim_runs): a call of the claim function (create_claim), whose statement the server
-- plans once per connection; the arguments in its order.
SELECT c.* FROM django_advisory_cron_claim(%(jobs)s::text[], %(classids)s::int[],
       %(objids)s::int[], %(hashed)s::text[], %(refs)s::timestamptz[], %(manual)s::boolean[],
       %(task_ids)s::text[], %(once)s::boolean[], %(match_n)s::bigint[],
       %(match_at)s::timestamptz[], %(match_tick)s::timestamptz[], %(skew)s::float8,
       %(host)s::text, %(pid)s::int, %(transaction)s::boolean, %(lease)s::float8,
       %(final)s::boolean, %(settle)s::boolean, %(record)s::boolean,
       %(synchronous_commit)s::text, %(slot_n)s::bigint[], %(slot_classids)s::int[],
       %(slot_objids)s::int[], %(slot_hashed)s::text[]) AS c

-- name: claim_runs_census
-- claim_runs, and a worker's census (create_census), read after the claim (its clock is never
-- ahead): the census is a scalar subquery, which the server runs once, when the subquery's
-- first row is made, after the claim function has run whole (OFFSET 0 keeps the subquery
-- whole, so the census is not copied into each column that reads it). Here, not in the claim
-- function, so that a claim without it does not start its plan.
SELECT t.released, t.got, t.run_id, t.tick, t.reference, t.interrupted, t.live, t.paused,
       t.slot, (t.census).clock, (t.census).workers, (t.census).requested, (t.census).version
  FROM (SELECT c.*, (SELECT django_advisory_cron_census(%(prefix)s)) AS census
          FROM django_advisory_cron_claim(%(jobs)s::text[], %(classids)s::int[],
               %(objids)s::int[], %(hashed)s::text[], %(refs)s::timestamptz[],
               %(manual)s::boolean[], %(task_ids)s::text[], %(once)s::boolean[],
               %(match_n)s::bigint[], %(match_at)s::timestamptz[],
               %(match_tick)s::timestamptz[], %(skew)s::float8, %(host)s::text, %(pid)s::int,
               %(transaction)s::boolean, %(lease)s::float8, %(final)s::boolean,
               %(settle)s::boolean, %(record)s::boolean, %(synchronous_commit)s::text,
               %(slot_n)s::bigint[], %(slot_classids)s::int[], %(slot_objids)s::int[],
               %(slot_hashed)s::text[]) AS c
        OFFSET 0) AS t

-- name: create_claim
-- The claim algorithm, installed by migration 0016, again with the run slots by 0027, and again
-- by 0032, whose index its at-most-once check probes (a later change of it is a migration that
-- runs this again). Why a function: PL/pgSQL keeps its statement's plan for the life of the
-- backend, so a claim is planned once per connection, not on every call, whether the call is
-- prepared or not: a transaction-scope claim on the project's connection, a worker's claim
-- connection that binds on the client, a connection behind a transaction pooler. The SET clause
-- makes the plan kept the generic one for the function's own statement only (left to itself,
-- the server plans a statement with array arguments again for its values on every call, which
-- costs several times running it); a set_config(..., true) inside still lasts for the
-- transaction. It also turns JIT off for the function: a generic plan is costed from the run
-- table's statistics, not the call's few jobs, so its estimate grows with the history and can
-- pass jit_above_cost (4 jobs with a million rows did), and a server built with JIT then
-- compiled the statement on every call: about 100 ms of CPU for each run and skip, for a
-- statement that runs in a millisecond. Each argument _x is the claim's %(x)s; a name that is
-- both a column and a returned column (tick, live, paused) means the column (use_column). A
-- target list is evaluated left to right; a data-modifying CTE runs to its end whether read or
-- not. _transaction picks the lock function; _lease NULL writes no lease; _synchronous_commit
-- NULL waits as the session does. "live": rows whose body may still be running, whatever their
-- status (a lease not expired). "m": each claim's tick, the match nearest its reference within
-- _skew (a join, so that a batch costs its claims and their matches, not their product). The
-- skip rows are written with _record, and for a manual claim; a lock held elsewhere is recorded
-- with who holds it, as the Held locks page (the heldlock view) shows it, and an earlier run
-- still alive with its id, host and pid. An at-most-once claim looks for its tick's running row
-- (in the (job, tick) index of the rows that take a tick) and its interrupted one (in their own
-- (job, tick) index, migration 0032): two probes, whatever the history holds. "x": the run
-- slots of the claims of jobs that may run several times at once (overlap allow_all), each
-- claim's keys in order (its job's own first): such a claim goes ahead while fewer of its job's
-- runs are live than it has slots, and takes the first slot free (not held by this backend,
-- which would take it again, then tried: the CASE keeps that order, and the scan stops at the
-- first taken); "slot" says which (NULL for a claim without slots).
CREATE OR REPLACE FUNCTION django_advisory_cron_claim(
    _jobs text[], _classids int[], _objids int[], _hashed text[], _refs timestamptz[],
    _manual boolean[], _task_ids text[], _once boolean[], _match_n bigint[],
    _match_at timestamptz[], _match_tick timestamptz[], _skew float8, _host text, _pid int,
    _transaction boolean, _lease float8, _final boolean, _settle boolean, _record boolean,
    _synchronous_commit text, _slot_n bigint[], _slot_classids int[], _slot_objids int[],
    _slot_hashed text[])
RETURNS TABLE (released boolean, got boolean, run_id bigint, tick timestamptz,
               reference timestamptz, interrupted bigint, live bigint, paused text, slot int)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET jit = off AS $claim$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH i AS (
    SELECT * FROM unnest(_jobs, _classids, _objids, _hashed, _refs, _manual, _task_ids, _once)
        WITH ORDINALITY AS i(job, classid, objid, hashed, ref, manual, task_id, once, n)
), paused AS (
    SELECT i.n, concat('paused', ' by ' || NULLIF(paused_by, ''), ' until ' || to_char(paused_until
           AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), ': ' || NULLIF(reason, '')) AS why
      FROM i JOIN "django_advisory_cron_jobstate" s ON s.job = i.job
     WHERE NOT i.manual AND paused AND (paused_until IS NULL OR paused_until > clock_timestamp())
), live AS (
    SELECT job, count(*) AS n FROM "django_advisory_cron_jobrun"
     WHERE job = ANY(_jobs) AND lease_until >= clock_timestamp() GROUP BY job
), x AS (
    SELECT x.*, row_number() OVER (PARTITION BY x.n ORDER BY x.k)::int AS slot,
           CASE WHEN x.hashed IS NULL THEN 2 ELSE 1 END AS sub,
           CASE WHEN x.hashed IS NULL THEN x.classid::bigint & 4294967295
                ELSE (hashtext(x.hashed)::bigint >> 32) & 4294967295 END AS k1,
           CASE WHEN x.hashed IS NULL THEN x.objid::bigint & 4294967295
                ELSE hashtext(x.hashed)::bigint & 4294967295 END AS k2
      FROM unnest(_slot_n, _slot_classids, _slot_objids, _slot_hashed)
           WITH ORDINALITY AS x(n, classid, objid, hashed, k)
), l AS (
    SELECT i.*, r.slots, p.why, COALESCE(v.n, 0) AS live, COALESCE(i.ref, now()) AS reference,
           CASE WHEN p.why IS NOT NULL OR v.n >= COALESCE(r.slots, 1) OR r.slots IS NOT NULL
                THEN false WHEN NOT _transaction
                AND i.hashed IS NULL THEN pg_try_advisory_lock(i.classid, i.objid)
                WHEN NOT _transaction THEN pg_try_advisory_lock(hashtext(i.hashed))
                WHEN i.hashed IS NULL THEN pg_try_advisory_xact_lock(i.classid, i.objid)
                ELSE pg_try_advisory_xact_lock(hashtext(i.hashed)) END AS own,
           CASE WHEN r.slots IS NULL OR p.why IS NOT NULL OR v.n >= r.slots THEN NULL ELSE (
               SELECT x.slot FROM x
                WHERE CASE WHEN x.n <> i.n OR EXISTS (
                               SELECT FROM pg_locks k
                                WHERE k.locktype = 'advisory' AND k.pid = pg_backend_pid()
                                  AND k.objsubid = x.sub AND k.classid::bigint = x.k1
                                  AND k.objid::bigint = x.k2) THEN false
                           WHEN NOT _transaction AND x.hashed IS NULL
                           THEN pg_try_advisory_lock(x.classid, x.objid)
                           WHEN NOT _transaction THEN pg_try_advisory_lock(hashtext(x.hashed))
                           WHEN x.hashed IS NULL
                           THEN pg_try_advisory_xact_lock(x.classid, x.objid)
                           ELSE pg_try_advisory_xact_lock(hashtext(x.hashed)) END
                LIMIT 1) END AS slot
      FROM i LEFT JOIN paused p USING (n) LEFT JOIN live v USING (job)
     CROSS JOIN LATERAL (SELECT CASE WHEN cardinality(_slot_n) > 0 THEN NULLIF(
               (SELECT count(*) FROM unnest(_slot_n) AS s(n) WHERE s.n = i.n), 0) END) r(slots)
), m AS (
    SELECT DISTINCT ON (c.n) c.n, c.tick
      FROM unnest(_match_n, _match_at, _match_tick) AS c(n, at, tick) JOIN l ON l.n = c.n
     WHERE abs(extract(epoch FROM c.at - l.reference)) <= _skew
     ORDER BY c.n, abs(extract(epoch FROM c.at - l.reference))
), t AS (
    SELECT l.*, l.own OR l.slot IS NOT NULL AS got, m.tick FROM l LEFT JOIN m ON m.n = l.n
), dead AS (
    UPDATE "django_advisory_cron_jobrun" r
       SET status = 'interrupted', finished = clock_timestamp(), lease_until = NULL,
           error = 'the process running it ended without recording its end; found by host '
                   || _host || ' pid ' || _pid
      FROM t
     WHERE r.job = ANY(_jobs) AND r.job = t.job AND t.got AND r.status = 'running'
       AND (r.lease_until IS NULL OR r.lease_until < clock_timestamp())
    RETURNING r.job
), ins AS (
    INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, status, error,
                                             lease_until, manual, task_id)
    SELECT t.job, t.tick, _host, _pid, clock_timestamp(), 'running', '',
           clock_timestamp() + make_interval(secs => _lease), t.manual, t.task_id
      FROM t WHERE t.got AND NOT (t.once AND (EXISTS (
        SELECT FROM "django_advisory_cron_jobrun" r WHERE r.job = t.job AND r.tick = t.tick
           AND r.status = 'running') OR EXISTS (
        SELECT FROM "django_advisory_cron_jobrun" r WHERE r.job = t.job AND r.tick = t.tick
           AND r.status = 'interrupted')))
    ON CONFLICT (job, tick)
       WHERE status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out') DO NOTHING
    RETURNING id, job, CASE WHEN _synchronous_commit IS NOT NULL
                            THEN set_config('synchronous_commit', _synchronous_commit, true)
                       END
), o AS (
    SELECT t.*, ins.id, d.interrupted,
           _settle AND t.got AND ins.id IS NULL AND (d.interrupted = 0 OR t.once) AS settled
      FROM t LEFT JOIN ins USING (job)
     CROSS JOIN LATERAL (SELECT count(*) AS interrupted FROM dead WHERE dead.job = t.job) d
), skip AS (
    INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, finished, status,
                                             error, manual, task_id)
    SELECT o.job, o.tick, _host, _pid, clock_timestamp(), clock_timestamp(),
           CASE WHEN o.got THEN 'skipped_tick'
                WHEN o.why IS NOT NULL THEN 'skipped_paused' ELSE 'skipped_locked' END,
           COALESCE(o.why, CASE WHEN o.slots IS NOT NULL AND NOT o.got
                                THEN 'its ' || o.live || ' runs going fill its ' || o.slots
                                     || ' run slots (max_concurrent), or their locks are held'
                                WHEN o.live > 0
                                THEN 'an earlier run is still alive (its lease has not expired)'
                                     || COALESCE((SELECT ': run ' || r.id || ' on host ' || r.host
                                                         || ' pid ' || r.pid
                                                    FROM "django_advisory_cron_jobrun" r
                                                   WHERE r.job = o.job
                                                     AND r.lease_until >= clock_timestamp()
                                                   ORDER BY r.started DESC LIMIT 1), '')
                                WHEN NOT o.got THEN (
               SELECT 'its lock is held by ' || string_agg('backend pid ' || h.pid || COALESCE(
                          ' (' || NULLIF(concat_ws(', ', NULLIF(h.application_name, ''),
                                                   'client ' || h.client_addr), '') || ')', ''),
                          '; ')
                 FROM "django_advisory_cron_heldlock" h
                WHERE h.granted AND CASE WHEN o.hashed IS NULL
                                         THEN h.key1 = o.classid AND h.key2 = o.objid
                                         ELSE h.bigkey = hashtext(o.hashed) END) END, ''),
           o.manual, o.task_id
      FROM o WHERE ((NOT o.got AND _final) OR o.settled) AND (_record OR o.manual)
)
SELECT CASE WHEN NOT o.settled THEN false
            WHEN o.slot IS NOT NULL THEN (
                SELECT CASE WHEN x.hashed IS NULL THEN pg_advisory_unlock(x.classid, x.objid)
                            ELSE pg_advisory_unlock(hashtext(x.hashed)) END
                  FROM x WHERE x.n = o.n AND x.slot = o.slot)
            WHEN o.hashed IS NULL THEN pg_advisory_unlock(o.classid, o.objid)
            ELSE pg_advisory_unlock(hashtext(o.hashed)) END,
       o.got, o.id, o.tick, o.reference, o.interrupted, o.live, o.why, o.slot
  FROM o ORDER BY o.n;
END
$claim$

-- name: create_census
-- A worker's census, installed by migration 0033: the server's clock, the live workers (their
-- application_name starts with _prefix), whether a "run now" request is pending, the version
-- of the database's schedules. A function for the same reason as the claim's: a worker's
-- connection binds its parameters on the client, so a statement sent as it is was planned at
-- every claim, and planning these reads of pg_stat_activity and two tables cost about
-- 0.27 ms a claim; PL/pgSQL plans them once per connection. Its row is a type of its own, so
-- that the claim's statement can read its fields.
CREATE TYPE django_advisory_cron_census AS (
    clock timestamptz, workers text[], requested boolean, version text);
CREATE FUNCTION django_advisory_cron_census(_prefix text) RETURNS django_advisory_cron_census
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET jit = off AS $census$
DECLARE
    found django_advisory_cron_census;
BEGIN
SELECT clock_timestamp(),
       (SELECT array_agg(a.application_name) FROM pg_stat_activity a
         WHERE a.datname = current_database() AND starts_with(a.application_name, _prefix)),
       EXISTS (SELECT FROM "django_advisory_cron_jobstate" WHERE run_requested IS NOT NULL),
       (SELECT count(*) || ' ' || COALESCE(max(changed)::text, '')
          FROM "django_advisory_cron_schedule")
  INTO found;
RETURN found;
END
$census$

-- name: drop_census
-- Migration 0033 undone.
DROP FUNCTION IF EXISTS django_advisory_cron_census(text);
DROP TYPE IF EXISTS django_advisory_cron_census

-- name: drop_claim
-- Migration 0016 undone (0027 undone first has dropped it already).
DROP FUNCTION IF EXISTS django_advisory_cron_claim

-- name: drop_claim_without_slots
-- The claim function as 0016 installed it before 0027 (without the run slots): 0027 drops it,
-- so that the call finds the one with them.
DROP FUNCTION IF EXISTS django_advisory_cron_claim(text[], int[], int[], text[], timestamptz[],
    boolean[], text[], boolean[], bigint[], timestamptz[], timestamptz[], float8, text, int,
    boolean, float8, boolean, boolean, boolean, text)

-- name: drop_claim_with_slots
-- Migration 0027 undone: the function goes (0027 then installs the one 0016 did).
DROP FUNCTION IF EXISTS django_advisory_cron_claim(text[], int[], int[], text[], timestamptz[],
    boolean[], text[], boolean[], bigint[], timestamptz[], timestamptz[], float8, text, int,
    boolean, float8, boolean, boolean, boolean, text, bigint[], int[], int[], text[])

-- name: claim_without_jit
-- Migration 0031: the claim function installed by 0027 before it turned JIT off (see
-- create_claim) turns it off too.
ALTER FUNCTION django_advisory_cron_claim(text[], int[], int[], text[], timestamptz[],
    boolean[], text[], boolean[], bigint[], timestamptz[], timestamptz[], float8, text, int,
    boolean, float8, boolean, boolean, boolean, text, bigint[], int[], int[], text[])
    SET jit = off

-- name: claim_with_jit
-- Migration 0031 undone: the claim function leaves JIT to the server's settings again.
ALTER FUNCTION django_advisory_cron_claim(text[], int[], int[], text[], timestamptz[],
    boolean[], text[], boolean[], bigint[], timestamptz[], timestamptz[], float8, text, int,
    boolean, float8, boolean, boolean, boolean, text, bigint[], int[], int[], text[])
    RESET jit

-- name: create_interrupted_tick_index
-- Migration 0032: the interrupted rows by (job, tick), which an at-most-once claim looks for
-- (see create_claim); without it, the claim read every interrupted row of every job. Built
-- concurrently, so a large history goes on taking runs while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS advisory_cron_interrupted_tick
    ON "django_advisory_cron_jobrun" (job, tick) WHERE status = 'interrupted'

-- name: drop_interrupted_tick_index
-- Migration 0032 undone.
DROP INDEX CONCURRENTLY IF EXISTS advisory_cron_interrupted_tick


-- name: unclaimed_ticks
-- Which of the job-ticks a worker is about to claim no run has taken yet: the position of each
-- (job, tick) without a row that takes the tick (a running row only while its lease holds: a
-- dead one is the claim's to give back). Reads only, tries no lock: one probe of the partial
-- unique index on (job, tick) per job-tick. A worker looks before claiming the jobs dealt to
-- the others, and claims only these.
SELECT u.n FROM unnest(%(jobs)s::text[], %(ticks)s::timestamptz[]) WITH ORDINALITY AS u(job, tick, n)
 WHERE NOT EXISTS (
    SELECT FROM "django_advisory_cron_jobrun" r
     WHERE r.job = u.job AND r.tick = u.tick
       AND r.status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out')
       AND (r.status <> 'running' OR r.lease_until >= clock_timestamp()))
 ORDER BY u.n

-- name: sighting
-- What a worker's claim reads besides its runs, alone: its census (create_census).
SELECT * FROM django_advisory_cron_census(%(prefix)s)

-- name: renew_leases
-- The heartbeat: renew the lease of each run whose lock this backend still holds. With
-- %(watch)s (a run of an overlap cancel_other job), also whether a new run has asked it to
-- stop (request_cancel): the request's text (NULL: none, or not watched).
WITH h AS (
    SELECT k.n, k.id, EXISTS (
        SELECT 1 FROM (SELECT * FROM pg_locks WHERE locktype = 'advisory'
                       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS l
         WHERE granted AND mode = 'ExclusiveLock' AND pid = pg_backend_pid()
           AND objsubid = CASE WHEN k.hashed IS NULL THEN 2 ELSE 1 END
           AND classid::bigint = CASE WHEN k.hashed IS NULL THEN k.classid::bigint & 4294967295
                                      ELSE (hashtext(k.hashed)::bigint >> 32) & 4294967295 END
           AND objid::bigint = CASE WHEN k.hashed IS NULL THEN k.objid::bigint & 4294967295
                                    ELSE hashtext(k.hashed)::bigint & 4294967295 END) AS held
      FROM unnest(%(ids)s::bigint[], %(classids)s::int[], %(objids)s::int[], %(hashed)s::text[])
           WITH ORDINALITY AS k(id, classid, objid, hashed, n)
), r AS (
    UPDATE "django_advisory_cron_jobrun"
       SET lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
     WHERE id IN (SELECT id FROM h WHERE held) AND status = 'running'
    RETURNING id, error
)
SELECT h.held AND h.id IN (SELECT id FROM r),
       CASE WHEN %(watch)s::boolean THEN (SELECT NULLIF(r.error, '') FROM r WHERE r.id = h.id) END
  FROM h ORDER BY h.n

-- name: renew_row_leases
-- The heartbeat of runs claimed behind a transaction pooler (lease scope), which hold no lock
-- after their claim: renew the lease of each running row while it has not run out (a row
-- whose lease ran out may be another replica's to end); one boolean row per run, in order:
-- renewed (false: the run lost its lease, as a lock is lost).
WITH r AS (
    UPDATE "django_advisory_cron_jobrun"
       SET lease_until = clock_timestamp() + make_interval(secs => %(lease)s)
     WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running'
       AND lease_until >= clock_timestamp()
    RETURNING id
)
SELECT k.id IN (SELECT id FROM r) FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS k(id, n)
 ORDER BY k.n

-- name: claim_tick
-- Claim a tick that the claim's own dead step just gave back.
INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, status, error,
                                         lease_until, task_id)
VALUES (%(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), 'running', '',
        clock_timestamp() + make_interval(secs => %(lease)s), %(task_id)s)
ON CONFLICT (job, tick)
   WHERE status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out') DO NOTHING
RETURNING id, CASE WHEN %(synchronous_commit)s::text IS NOT NULL
                   THEN set_config('synchronous_commit', %(synchronous_commit)s, true) END

-- name: finish_run
-- Finish a run's row (its status unless another holder closed it, its end, its lease ended,
-- its error appended), then unlock in session scope (and unlock everything unless the
-- connection is %(shared)s); the first column is the unlock's answer (true in a transaction).
WITH w AS (UPDATE "django_advisory_cron_jobrun" SET
    status = CASE WHEN status IN ('running', 'lock_lost') THEN %(status)s ELSE status END,
    finished = CASE WHEN status IN ('running', 'lock_lost') OR finished IS NULL
                    THEN clock_timestamp() ELSE finished END,
    lease_until = NULL,
    error = CASE WHEN error = '' THEN %(error)s
                 WHEN %(error)s = '' THEN error
                 ELSE error || E'\n' || %(error)s END,
    attempts = %(attempts)s, output = %(output)s
     WHERE id = %(id)s
    RETURNING id, CASE WHEN %(synchronous_commit)s::text IS NOT NULL
                       THEN set_config('synchronous_commit', %(synchronous_commit)s, true) END
)
SELECT CASE WHEN %(transaction)s THEN true
            WHEN %(lock_name)s::text IS NULL THEN pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)
            ELSE pg_advisory_unlock(hashtext(%(lock_name)s)) END,
       CASE WHEN NOT (%(transaction)s OR %(shared)s) THEN pg_advisory_unlock_all() END

-- name: finish_runs
-- finish_run for several runs held on one worker's claim connection whose finishes met there
-- (see db.finishes): one statement and one commit for them all. Each row is finished as
-- finish_run finishes one. The main query reads the rows written before it unlocks anything,
-- so a statement refused for one of them (a value it carries, a write refused) unlocks
-- nothing, and each finish is then sent alone. One row per run, in order: the unlock's answer
-- (true in lease scope, %(transaction)s, where no lock outlives the claim).
WITH f AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(statuses)s::text[], %(errors)s::text[],
                         %(attempts)s::int[], %(outputs)s::text[], %(lock_ns)s::int[],
                         %(lock_ids)s::int[], %(lock_names)s::text[])
        WITH ORDINALITY AS f(id, status, error, attempts, output, lock_ns, lock_id, lock_name, n)
), w AS (
    UPDATE "django_advisory_cron_jobrun" r SET
        status = CASE WHEN r.status IN ('running', 'lock_lost') THEN f.status ELSE r.status END,
        finished = CASE WHEN r.status IN ('running', 'lock_lost') OR r.finished IS NULL
                        THEN clock_timestamp() ELSE r.finished END,
        lease_until = NULL,
        error = CASE WHEN r.error = '' THEN f.error
                     WHEN f.error = '' THEN r.error
                     ELSE r.error || E'\n' || f.error END,
        attempts = f.attempts, output = f.output
      FROM f WHERE r.id = ANY(%(ids)s::bigint[]) AND r.id = f.id
    RETURNING r.id, CASE WHEN %(synchronous_commit)s::text IS NOT NULL
                         THEN set_config('synchronous_commit', %(synchronous_commit)s, true) END
)
SELECT CASE WHEN %(transaction)s THEN true
            WHEN f.lock_name IS NULL THEN pg_advisory_unlock(f.lock_ns, f.lock_id)
            ELSE pg_advisory_unlock(hashtext(f.lock_name)) END
  FROM f CROSS JOIN (SELECT count(*) FROM w) AS written(rows)
 WHERE written.rows >= 0
 ORDER BY f.n

-- name: skip_tick
-- Record a skip for a tick that already ran, then unlock as finish_run does.
WITH w AS (INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, finished,
                                                     status, error, task_id)
    VALUES (%(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
            'skipped_tick', '', %(task_id)s)
)
SELECT CASE WHEN %(transaction)s THEN true
            WHEN %(lock_name)s::text IS NULL THEN pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)
            ELSE pg_advisory_unlock(hashtext(%(lock_name)s)) END,
       CASE WHEN NOT (%(transaction)s OR %(shared)s) THEN pg_advisory_unlock_all() END

-- name: mark_lock_lost
-- Mark a running run lock_lost; its lease is kept, not renewed.
UPDATE "django_advisory_cron_jobrun" SET status = 'lock_lost', error = %(error)s
 WHERE id = %(id)s AND job = %(job)s AND host = %(host)s AND pid = %(pid)s
   AND status = 'running'

-- name: record_lost_run
-- Record the end of a run whose lock was lost, through another connection: its own row (the
-- id, and who wrote it: after a failover the id may be another run's), or a new one.
WITH upd AS (
    UPDATE "django_advisory_cron_jobrun" SET
           attempts = CASE WHEN status IN ('running', 'lock_lost') THEN %(attempts)s
                           ELSE attempts END,
           output = CASE WHEN status IN ('running', 'lock_lost') THEN %(output)s
                         ELSE output END,
           status = CASE WHEN status IN ('running', 'lock_lost') THEN %(status)s ELSE status END,
           finished = CASE WHEN status IN ('running', 'lock_lost') OR finished IS NULL
                           THEN clock_timestamp() ELSE finished END,
           lease_until = NULL,
           error = CASE WHEN error = '' THEN %(error)s
                        WHEN %(error)s = '' THEN error
                        ELSE error || E'\n' || %(error)s END
     WHERE id = %(id)s AND job = %(job)s AND host = %(host)s AND pid = %(pid)s
    RETURNING id
), ins AS (
    INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, finished, status,
                                             error, attempts, output, task_id)
    SELECT %(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
           %(status)s, %(error)s, %(attempts)s, %(output)s, %(task_id)s
     WHERE NOT EXISTS (SELECT 1 FROM upd)
    ON CONFLICT (job, tick)
       WHERE status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out') DO NOTHING
    RETURNING id
)
INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, finished, status, error,
                                         attempts, output, task_id)
SELECT %(job)s, NULL, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(), %(status)s,
       %(error)s || E'\n(tick ' || %(tick)s::text || ' was run by another replica)',
       %(attempts)s, %(output)s, %(task_id)s
 WHERE NOT EXISTS (SELECT 1 FROM upd) AND NOT EXISTS (SELECT 1 FROM ins)

-- name: request_cancel
-- overlap cancel_other: a new run of the job asks those going for earlier ticks (or for none;
-- never its own tick's or a later one's) to stop: their rows keep running, with the request
-- as their error text (a running row has none; its heartbeat reads it, see
-- renew_leases; its finish appends its own end to it); a request already made is
-- kept. The ids of the runs asked (now or before).
UPDATE "django_advisory_cron_jobrun"
   SET error = CASE WHEN error = '' THEN 'cancelled by a new run (overlap cancel_other) '
                    || 'started by host ' || %(host)s || ' pid ' || %(pid)s ELSE error END
 WHERE job = %(job)s AND status = 'running' AND lease_until >= clock_timestamp()
   AND (%(tick)s::timestamptz IS NULL OR tick IS NULL OR tick < %(tick)s::timestamptz)
RETURNING id

-- name: runs_going
-- Which of the runs %(ids)s still go: their rows running, their leases alive.
SELECT count(*) FROM "django_advisory_cron_jobrun"
 WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running' AND lease_until >= clock_timestamp()

-- name: replace_runs
-- overlap terminate_other (and cancel_other, for the runs asked to stop that are still going
-- after the grace): a new run of the job replaces those going for earlier ticks (or
-- for none; never a run of its own tick or a later one, which another replica's replacing run
-- may be). Their rows say so (as lock_lost: they took their ticks), their leases end now (the
-- new claim does not wait for them), and, when it replaced any, the backends holding the
-- job's lock are terminated (never our own), each waited for up to 5 s, so that the lock is
-- free when this returns: each holder stops as on a lost lock, and appends its own end to its
-- row. The rows replaced and the backends terminated.
WITH old AS (
    UPDATE "django_advisory_cron_jobrun"
       SET status = 'lock_lost', lease_until = NULL,
           error = CASE WHEN %(policy)s::text = 'terminate_other'
                        THEN 'replaced by a new run (overlap terminate_other) started by host '
                             || %(host)s || ' pid ' || %(pid)s
                        ELSE error || ': still going ' || %(grace)s::text
                             || ' s after it was asked to stop, so its lock holder was terminated'
                   END
     WHERE job = %(job)s AND status = 'running' AND lease_until IS NOT NULL
       AND (%(tick)s::timestamptz IS NULL OR tick IS NULL OR tick < %(tick)s)
    RETURNING id
)
SELECT (SELECT count(*) FROM old),
       (SELECT count(*) FILTER (WHERE pg_terminate_backend(l.pid, 5000)) FROM pg_locks l
         WHERE (SELECT count(*) FROM old) > 0 AND l.locktype = 'advisory' AND l.granted
           AND l.pid <> pg_backend_pid()
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND l.objsubid = CASE WHEN %(lock_name)s::text IS NULL THEN 2 ELSE 1 END
           AND l.classid::bigint = CASE WHEN %(lock_name)s::text IS NULL
                                        THEN %(lock_ns)s::bigint & 4294967295
                                        ELSE (hashtext(%(lock_name)s)::bigint >> 32) & 4294967295
                                   END
           AND l.objid::bigint = CASE WHEN %(lock_name)s::text IS NULL
                                      THEN %(lock_id)s::bigint & 4294967295
                                      ELSE hashtext(%(lock_name)s)::bigint & 4294967295 END)

-- name: lock_waiting
-- overlap buffer_one and buffer_all: the first statement of the transaction that records a
-- tick that found its job busy (wait_tick, next): a transaction lock on the job's waiting key
-- (not the job's own, which the run going holds), so that replicas record a job's waiting
-- ticks one at a time and the bound holds; wait_tick's snapshot, taken after it, sees what
-- the one before committed. Released by the commit.
SELECT CASE WHEN %(lock_name)s::text IS NULL
            THEN pg_advisory_xact_lock(%(lock_ns)s::int, %(lock_id)s::int)::text
            ELSE pg_advisory_xact_lock(hashtext(%(lock_name)s))::text END

-- name: wait_tick
-- Record a tick that found its job busy as waiting, after lock_waiting: nothing when the tick
-- already has a row that waits, runs or ran, or was skipped for the bound (another replica
-- recorded it); else a waiting row (no lease: nobody's run yet, no live run), or, with
-- %(bound)s::int ticks already waiting (those no run has taken), a skipped row that says why. The
-- row's status and text, or those of the row another replica wrote (no row: the tick has
-- run, or is running).
WITH r AS (
    SELECT r.tick, r.status, r.error, r.status = 'waiting' AND NOT EXISTS (
               SELECT FROM "django_advisory_cron_jobrun" t
                WHERE t.job = r.job AND t.tick = r.tick
                  AND t.status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out'))
               AS waits
      FROM "django_advisory_cron_jobrun" r
     WHERE r.job = %(job)s AND (r.status = 'waiting' OR r.tick = %(tick)s::timestamptz)
), w AS (
    SELECT count(*) FILTER (WHERE r.waits AND r.tick <> %(tick)s::timestamptz) AS waiting,
           min(r.tick) FILTER (WHERE r.waits) AS oldest,
           COALESCE(bool_or(r.tick = %(tick)s::timestamptz AND (r.status = 'waiting'
               OR r.status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out')
               OR (r.status = 'skipped_locked' AND r.error LIKE '%%(overlap buffer_%%'))),
               false) AS seen
      FROM r
), ins AS (
    INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, finished, status,
                                             error, manual, task_id)
    SELECT %(job)s, %(tick)s::timestamptz, %(host)s, %(pid)s, clock_timestamp(),
           CASE WHEN w.waiting >= %(bound)s::int THEN clock_timestamp() END,
           CASE WHEN w.waiting < %(bound)s::int THEN 'waiting' ELSE 'skipped_locked' END,
           CASE WHEN w.waiting < %(bound)s::int
                THEN 'waits for the run going to end (overlap ' || %(policy)s::text || ')'
                WHEN %(bound)s::int = 1
                THEN 'a tick is already waiting (overlap buffer_one): tick '
                     || to_char(w.oldest AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                ELSE w.waiting || ' ticks are already waiting, the bound (overlap '
                     || %(policy)s::text || ')' END,
           false, ''
      FROM w WHERE NOT w.seen
    ON CONFLICT DO NOTHING
    RETURNING status, error
)
SELECT status, error FROM ins
UNION ALL
(SELECT r.status, r.error FROM r
  WHERE r.tick = %(tick)s::timestamptz AND NOT EXISTS (SELECT FROM ins)
    AND (r.status = 'waiting' OR (r.status = 'skipped_locked'
                                  AND r.error LIKE '%%(overlap buffer_%%'))
  LIMIT 1)

-- name: next_waiting
-- The job's oldest waiting tick that no run has taken yet (NULL: none; with %(before)s, only
-- one before it), read after deleting the waiting rows whose tick a run has taken (their run
-- started; a replica that died between its claim and unwait_tick leaves one).
WITH done AS (
    DELETE FROM "django_advisory_cron_jobrun" w
     WHERE w.job = %(job)s AND w.status = 'waiting' AND EXISTS (
           SELECT FROM "django_advisory_cron_jobrun" t
            WHERE t.job = w.job AND t.tick = w.tick
              AND t.status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out'))
)
SELECT min(w.tick) FROM "django_advisory_cron_jobrun" w
 WHERE w.job = %(job)s AND w.status = 'waiting'
   AND (%(before)s::timestamptz IS NULL OR w.tick < %(before)s::timestamptz)
   AND NOT EXISTS (
       SELECT FROM "django_advisory_cron_jobrun" t
        WHERE t.job = w.job AND t.tick = w.tick
          AND t.status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out'))

-- name: unwait_tick
-- The waiting tick's run is claimed: its waiting row goes (the run's row is the tick's).
DELETE FROM "django_advisory_cron_jobrun"
 WHERE job = %(job)s AND tick = %(tick)s AND status = 'waiting'

-- name: fail_committed_run
-- A run whose transaction committed but whose on_commit callback raised.
UPDATE "django_advisory_cron_jobrun" SET status = 'failed', error = %(error)s WHERE id = %(id)s

-- name: claim_enqueue
-- Claim the enqueueing of (job, tick) for a task queue (see sql.claim_enqueue).
WITH p AS (
    SELECT concat('paused', ' by ' || NULLIF(paused_by, ''), ' until '
                  || to_char(paused_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                  ': ' || NULLIF(reason, '')) AS why
      FROM "django_advisory_cron_jobstate"
     WHERE job = %(job)s
       AND paused AND (paused_until IS NULL OR paused_until > clock_timestamp())
), ins AS (
    INSERT INTO "django_advisory_cron_enqueuedtick" (job, tick, backend, task_id, host, pid,
                                                   enqueued)
    SELECT %(job)s, %(tick)s, %(backend)s, '', %(host)s, %(pid)s, clock_timestamp()
     WHERE NOT EXISTS (SELECT 1 FROM "django_advisory_cron_jobrun"
                        WHERE job = %(job)s AND tick = %(tick)s
                          AND status IN ('running', 'succeeded', 'failed', 'lock_lost',
                                         'timed_out'))
       AND NOT EXISTS (SELECT 1 FROM p)
    ON CONFLICT (job, tick) DO NOTHING
    RETURNING id, enqueued
), old AS (
    DELETE FROM "django_advisory_cron_enqueuedtick"
     WHERE job = %(job)s AND tick < %(tick)s::timestamptz - make_interval(days => %(keep)s)
       AND EXISTS (SELECT 1 FROM ins)
), run AS (
    INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, status, error,
                                             lease_until)
    SELECT %(job)s, %(tick)s, %(host)s, %(pid)s, enqueued, 'running', '',
           clock_timestamp() + make_interval(secs => %(lease)s::float8)
      FROM ins WHERE %(record)s
    ON CONFLICT (job, tick)
       WHERE status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out') DO NOTHING
    RETURNING id
), dead AS (
    -- A run of the tick other than the send's own (written with the claim, from its time) is
    -- its task's: the enqueue went through.
    INSERT INTO "django_advisory_cron_jobrun" AS r (job, tick, host, pid, started, finished,
                                                  status, error)
    SELECT c.job, c.tick, c.host, c.pid, c.enqueued, clock_timestamp(), 'failed',
           'its sender (host ' || c.host || ' pid ' || c.pid || ') died waiting for '
           || c.backend || ': ' || %(unsure)s || '; found by host ' || %(host)s
           || ' pid ' || %(pid)s
      FROM "django_advisory_cron_enqueuedtick" c
     WHERE %(lease)s::float8 IS NOT NULL AND c.job = %(job)s AND c.task_id = ''
       AND c.enqueued < clock_timestamp() - make_interval(secs => %(lease)s::float8)
       AND NOT EXISTS (SELECT 1 FROM "django_advisory_cron_jobrun"
                        WHERE job = c.job AND tick = c.tick AND started <> c.enqueued)
    ON CONFLICT (job, tick)
       WHERE status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out') DO UPDATE
       SET status = EXCLUDED.status, finished = EXCLUDED.finished, error = EXCLUDED.error,
           lease_until = NULL
     WHERE r.status = 'running'
    RETURNING r.id, r.tick, r.error
)
SELECT (SELECT id FROM ins),
       EXISTS (SELECT 1 FROM "django_advisory_cron_jobrun"
                WHERE job = %(job)s AND tick = %(tick)s
                  AND status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out')
                  AND NOT (%(record)s AND status = 'running')),
       (SELECT why FROM p),
       (SELECT id FROM run),
       (SELECT json_agg(json_build_array(id, tick, error) ORDER BY tick) FROM dead)

-- name: enqueued
-- Store the task result id the queue returned on the claim.
UPDATE "django_advisory_cron_enqueuedtick" SET task_id = %(task_id)s WHERE id = %(id)s

-- name: enqueued_run
-- The same, and the tick's run written at the claim succeeded (sent) with it.
WITH claim AS (
    UPDATE "django_advisory_cron_enqueuedtick" SET task_id = %(task_id)s WHERE id = %(id)s
)
UPDATE "django_advisory_cron_jobrun"
   SET status = 'succeeded', finished = clock_timestamp(), lease_until = NULL, error = '',
       task_id = %(task_id)s
 WHERE id = %(run)s
RETURNING id

-- name: release_claim
-- Give the claim back after a failed enqueue.
DELETE FROM "django_advisory_cron_enqueuedtick" WHERE id = %(id)s

-- name: refused_send
-- A claimed tick whose message the queue refused: its run failed, the claim goes.
WITH claim AS (DELETE FROM "django_advisory_cron_enqueuedtick" WHERE id = %(id)s)
UPDATE "django_advisory_cron_jobrun"
   SET status = 'failed', finished = clock_timestamp(), lease_until = NULL, error = %(error)s
 WHERE id = %(run)s
RETURNING id

-- name: unclaimed_send
-- A send that claimed no tick, recorded as its run.
INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, finished, status, error,
                                         task_id, manual)
VALUES (%(job)s, NULL, %(host)s, %(pid)s, %(started)s, clock_timestamp(),
        CASE WHEN %(error)s = '' THEN 'succeeded' ELSE 'failed' END, %(error)s,
        %(task_id)s, %(manual)s)
RETURNING id

-- name: skip_overlapping
-- A tick skipped because the job's previous run is still going.
INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, finished, status, error)
VALUES (%(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
        'skipped_locked',
        COALESCE('its previous run (run ' || (SELECT id FROM "django_advisory_cron_jobrun"
                   WHERE job = %(job)s AND lease_until IS NOT NULL AND finished IS NULL
                   ORDER BY started DESC LIMIT 1) || ') is still running', %(otherwise)s))
RETURNING error

-- name: child_run
-- The latest row a worker's child process wrote for the tick.
SELECT id, status FROM "django_advisory_cron_jobrun"
 WHERE job = %(job)s AND host = %(host)s AND pid = %(pid)s
   AND tick IS NOT DISTINCT FROM %(tick)s
 ORDER BY id DESC LIMIT 1

-- name: finish_child_run
-- Finish the run of a worker's child process that was killed (or write it, if it left none).
WITH mine AS (
    SELECT id, status FROM "django_advisory_cron_jobrun"
     WHERE job = %(job)s AND host = %(host)s AND pid = %(pid)s
       AND tick IS NOT DISTINCT FROM %(tick)s
     ORDER BY id DESC LIMIT 1
), upd AS (
    UPDATE "django_advisory_cron_jobrun" SET
           status = CASE WHEN status IN ('running', 'lock_lost') THEN %(status)s ELSE status END,
           finished = CASE WHEN status IN ('running', 'lock_lost') OR finished IS NULL
                           THEN clock_timestamp() ELSE finished END,
           lease_until = NULL,
           error = CASE WHEN error = '' THEN %(error)s
                        WHEN %(error)s = '' THEN error
                        ELSE error || E'\n' || %(error)s END
     WHERE id = (SELECT id FROM mine) AND status IN ('running', 'lock_lost')
)
INSERT INTO "django_advisory_cron_jobrun" (job, tick, host, pid, started, finished, status, error)
SELECT %(job)s, %(tick)s, %(host)s, %(pid)s, clock_timestamp(), clock_timestamp(),
       %(status)s, %(error)s
 WHERE NOT EXISTS (SELECT 1 FROM mine)
ON CONFLICT (job, tick)
   WHERE status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out') DO NOTHING

-- name: request_run
-- Record a "run now" request (a pending one is kept) and wake the workers that LISTEN.
WITH req AS (
    INSERT INTO "django_advisory_cron_jobstate" (job, paused, paused_by, reason, run_requested,
                                               run_requested_by, changed)
    VALUES (%(job)s, false, '', '', now(), %(by)s, now())
    ON CONFLICT (job) DO UPDATE
       SET run_requested = COALESCE("django_advisory_cron_jobstate".run_requested,
                                    EXCLUDED.run_requested),
           run_requested_by = CASE WHEN "django_advisory_cron_jobstate".run_requested IS NULL
                                   THEN EXCLUDED.run_requested_by
                                   ELSE "django_advisory_cron_jobstate".run_requested_by END,
           changed = now()
    RETURNING run_requested
)
SELECT run_requested, pg_notify(%(channel)s, %(job)s) FROM req

-- name: claim_run_requests
-- Take the pending "run now" requests of the jobs, each for one worker only. RETURNING gives
-- the new row: the request's time and author are read before the update.
WITH taken AS (
    SELECT job, run_requested, run_requested_by FROM "django_advisory_cron_jobstate"
     WHERE job = ANY(%(jobs)s) AND run_requested IS NOT NULL
       FOR UPDATE
)
UPDATE "django_advisory_cron_jobstate" s
   SET run_requested = NULL, run_requested_by = '', changed = now()
  FROM taken WHERE s.job = taken.job
RETURNING taken.job, taken.run_requested, taken.run_requested_by

-- name: claim_tenant_run_requests
-- Take the pending "run now" requests of the per-tenant jobs' tenants (name@schema: the name
-- before the last @ is one of the jobs), each for one worker only, as claim_run_requests.
WITH taken AS (
    SELECT job, run_requested, run_requested_by FROM "django_advisory_cron_jobstate"
     WHERE run_requested IS NOT NULL AND strpos(job, '@') > 0
       AND left(job, length(job) - strpos(reverse(job), '@')) = ANY(%(jobs)s)
       FOR UPDATE
)
UPDATE "django_advisory_cron_jobstate" s
   SET run_requested = NULL, run_requested_by = '', changed = now()
  FROM taken WHERE s.job = taken.job
RETURNING taken.job, taken.run_requested, taken.run_requested_by

-- name: latest_recorded_ticks
-- The latest tick each job has a row for, whatever its status. Two index scans per job, never
-- the whole history: the greatest tick among the rows that take a tick (the partial unique
-- index on (job, tick)), and the tick of the most recently started row that has one (the
-- (job, started) index), which is where a later skip would be. A pause decides every tick up
-- to its end (now() while it lasts), though its skips leave no row: a job resumes with its
-- next tick. So does a reset of its override, for a job with a tick or a pause (the
-- override's changed anchored catch-up until the reset deleted it).
SELECT j.job, GREATEST(r.latest, CASE WHEN r.latest IS NOT NULL THEN s.schedule_reset END)
  FROM unnest(%(jobs)s::text[]) AS j(job)
  LEFT JOIN "django_advisory_cron_jobstate" s ON s.job = j.job
  CROSS JOIN LATERAL (SELECT GREATEST(
    (SELECT tick FROM "django_advisory_cron_jobrun"
      WHERE job = j.job AND status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out')
        AND tick IS NOT NULL
      ORDER BY tick DESC LIMIT 1),
    (SELECT tick FROM "django_advisory_cron_jobrun" WHERE job = j.job AND tick IS NOT NULL
      ORDER BY started DESC LIMIT 1),
    CASE WHEN s.paused_at IS NULL THEN NULL
         WHEN paused AND (paused_until IS NULL OR paused_until > clock_timestamp()) THEN now()
         ELSE s.paused_until END) AS latest) r

-- name: listen_runs
LISTEN django_advisory_cron_run

-- name: listen_schedules
LISTEN django_advisory_cron_schedules

-- name: schedule_rows
-- Every schedule kept in the database (its options in the order of jobs/options.OPTIONS,
-- then changed; a time Python cannot hold read as NULL), the names of those times, and the
-- version the schedules make (any write or delete changes it). Python holds a day inside its
-- years 1 to 9999, for any zone: the database takes more ('infinity', the year 200000),
-- which the driver cannot read.
SELECT s.name, s.job, s.command, s.args, s.kwargs, s.cron, s.every, s.timezone, s.enabled,
       s.override, s.catch_up, s.max_lateness, s.late_after, s.jitter, s.timeout, s.deliver,
       s.description,
       CASE WHEN s.starts BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00'
            THEN s.starts END,
       CASE WHEN s.ends BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00' THEN s.ends END,
       s.retries, s.retry_backoff, s.at_most_once, s.capture,
       CASE WHEN s.at BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00' THEN s.at END,
       s.max_runs, s.overlap, s.max_concurrent, s.calendar, s.per_tenant,
       CASE WHEN s.changed BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00'
            THEN s.changed END,
       concat_ws(' and ',
                 CASE WHEN NOT s.starts BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00'
                      THEN 'starts' END,
                 CASE WHEN NOT s.ends BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00'
                      THEN 'ends' END,
                 CASE WHEN NOT s.changed BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00'
                      THEN 'changed' END),
       v.version
  FROM (SELECT (SELECT count(*) || ' ' || COALESCE(max(changed)::text, '')
                  FROM "django_advisory_cron_schedule") AS version) v
  LEFT JOIN "django_advisory_cron_schedule" s ON true
 ORDER BY s.name

-- name: live_workers
-- The sessions of live cronworker processes, oldest first.
SELECT application_name, backend_start, client_addr FROM pg_stat_activity
 WHERE datname = current_database() AND starts_with(application_name, %(prefix)s)
 ORDER BY backend_start

-- name: probe_lock
-- Client A of the pooling probe: its backend and a shared lock on the probe key. The probe
-- speaks the simple query protocol: the builder writes the integers in.
SELECT pg_backend_pid(), pg_try_advisory_lock_shared(%(classid)s, %(objid)s)

-- name: probe_still_held
-- Client B of the pooling probe: is client A's shared lock still held by its backend?
SELECT count(*)
  FROM (SELECT * FROM pg_locks WHERE locktype = 'advisory'
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS l
 WHERE granted AND pid = %(pid)s
   AND classid = %(classid)s AND objid = %(objid)s AND objsubid = %(objsubid)s

-- name: terminate_holders
-- Terminate the backends among the pids that hold an advisory lock now (never our own).
SELECT holder.pid, pg_terminate_backend(holder.pid)
  FROM (SELECT DISTINCT pid
          FROM (SELECT * FROM pg_locks WHERE locktype = 'advisory'
                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS l
         WHERE granted AND pid = ANY(%(pids)s) AND pid <> pg_backend_pid()) AS holder

-- name: job_summaries
-- Per job: its last run that was not a skip (reads.RUN_COLUMNS), the start of its last
-- success, and its runs per status since %(since)s. The last run walks the (job, started)
-- index past the skips after it (in its order, so no other index is cheaper); the last
-- success is one descent of (job, status, started, id), however long ago it was (a job that
-- has failed for weeks included); the counts walk (job, started) over the window, and so does
-- the lateness of its runs that had a tick (start - tick): per bucket, the number of the
-- %(late_bounds)s (descending, negated: -x <= -b is x <= b) that each is at or below, and
-- their sum in seconds. For the jobs in %(targets)s (those with a lateness target) only, the
-- tick and start of the last run that had a tick: the last run's when it had one (no second
-- walk: the other branch's filter is false once per row), else the walk of the (job, started)
-- index goes on past the manual runs after it. Then the job's state (reads.STATE_COLUMNS, NULLs
-- without a row: one probe of its primary key) and, on the first job's row only and with
-- %(prefix)s, the live workers (their application_name starts with it) as three arrays, oldest
-- first: a page that shows the jobs and the workers reads both in one statement.
SELECT j.job, r.id, r.job, r.tick, r.host, r.pid, r.started, r.finished, r.status, r.error,
       r.manual, s.started, c.counts, l.buckets, l.seconds, k.tick, k.started,
       st.job, st.paused, st.paused_at, st.paused_until, st.paused_by, st.reason,
       st.run_requested, st.run_requested_by, st.changed, st.schedule_reset,
       w.names, w.since, w.addresses
FROM unnest(%(jobs)s::text[]) WITH ORDINALITY AS j(job, n)
LEFT JOIN "django_advisory_cron_jobstate" AS st ON st.job = j.job
LEFT JOIN (
    SELECT COALESCE(array_agg(a.application_name ORDER BY a.backend_start), '{}') AS names,
           COALESCE(array_agg(a.backend_start ORDER BY a.backend_start), '{}') AS since,
           COALESCE(array_agg(a.client_addr ORDER BY a.backend_start), '{}') AS addresses
      FROM pg_stat_activity AS a
     WHERE %(prefix)s::text IS NOT NULL AND a.datname = current_database()
       AND starts_with(a.application_name, %(prefix)s::text)
) AS w ON j.n = 1 AND %(prefix)s::text IS NOT NULL
LEFT JOIN LATERAL (
    SELECT * FROM "django_advisory_cron_jobrun" AS t
     WHERE t.job = j.job AND t.status <> ALL(%(skips)s::text[])
     ORDER BY t.started DESC LIMIT 1
) AS r ON true
LEFT JOIN LATERAL (
    SELECT r.tick, r.started WHERE r.tick IS NOT NULL AND j.job = ANY(%(targets)s::text[])
    UNION ALL
    (SELECT t.tick, t.started FROM "django_advisory_cron_jobrun" AS t
      WHERE r.id IS NOT NULL AND r.tick IS NULL AND j.job = ANY(%(targets)s::text[])
        AND t.job = j.job AND t.tick IS NOT NULL AND t.status <> ALL(%(skips)s::text[])
      ORDER BY t.started DESC LIMIT 1)
    LIMIT 1
) AS k ON true
LEFT JOIN LATERAL (
    SELECT t.started FROM "django_advisory_cron_jobrun" AS t
     WHERE t.job = j.job AND t.status = 'succeeded'
     ORDER BY t.started DESC LIMIT 1
) AS s ON true
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(g.status, g.runs)::text AS counts FROM (
        SELECT t.status, count(*) AS runs FROM "django_advisory_cron_jobrun" AS t
        WHERE %(since)s::timestamptz IS NOT NULL AND t.job = j.job
          AND t.started >= %(since)s::timestamptz
        GROUP BY t.status
    ) AS g
) AS c ON true
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(g.bucket, g.runs)::text AS buckets, sum(g.seconds) AS seconds FROM (
        SELECT width_bucket(-w.late, %(late_bounds)s::float8[]) AS bucket, count(*) AS runs,
               sum(w.late) AS seconds
          FROM (SELECT extract(epoch FROM t.started - t.tick)::float8 AS late
                  FROM "django_advisory_cron_jobrun" AS t
                 WHERE %(since)s::timestamptz IS NOT NULL AND t.job = j.job
                   AND t.started >= %(since)s::timestamptz AND t.tick IS NOT NULL
                   AND t.status <> ALL(%(skips)s::text[])) AS w
         GROUP BY 1
    ) AS g
) AS l ON true
ORDER BY j.job

-- name: recent_runs
-- The last runs of each job that were not skips, with the seconds each ran (none below 0: a
-- clock behind the start's), the tick in seconds since the epoch (a page reads 2,500 of them:
-- a number is cheaper to read than a time). Each job's walk of (job, started) reads only the
-- columns shown, and the rows come in the order of %(jobs)s: the server knows the walks give
-- that order, where sorting 2,500 rows by job name took it 11 ms (a collation's comparisons).
SELECT r.job, extract(epoch FROM r.tick)::float8, r.host, r.pid, r.status,
       GREATEST(extract(epoch FROM COALESCE(r.finished,
                                            CASE WHEN r.status = 'running' THEN now()
                                                 ELSE r.started END)
                                   - r.started)::float8, 0)
FROM unnest(%(jobs)s::text[]) WITH ORDINALITY AS j(job, n)
CROSS JOIN LATERAL (
    SELECT t.id, t.job, t.tick, t.host, t.pid, t.status, t.started, t.finished
      FROM "django_advisory_cron_jobrun" AS t
     WHERE t.job = j.job AND t.status <> ALL(%(skips)s::text[])
     ORDER BY t.started DESC, t.id DESC LIMIT %(limit)s
) AS r
ORDER BY j.n, r.started DESC, r.id DESC

-- name: timeline_runs
-- The timeline's window on the database's clock (it ends at %(ends)s, or %(ahead)s after now),
-- then for each job its pause and its runs in the window: those started in it (newest first, at
-- most %(limit)s), and its last run (not a skip) started before it when that run was still
-- going at the window's start (a job's runs do not overlap: its lock). Each part is a short
-- walk of the (job, started) index, however long the history. One row per run, in no order
-- (sorting thousands of rows by a job's name costs the server more than sorting each job's
-- few in Python); a job without a run in the window has one row whose run columns are NULL;
-- no job at all: one row of the window alone. Times are seconds since the epoch: a page reads thousands of them, and a
-- number costs the driver a tenth of what a timestamp does.
WITH w AS (
    SELECT now() AS now,
           COALESCE(%(ends)s::timestamptz, now() + %(ahead)s::interval) AS ends
), b AS (
    SELECT now, ends - %(span)s::interval AS starts, ends FROM w
)
SELECT extract(epoch FROM b.now)::float8, extract(epoch FROM b.starts)::float8,
       extract(epoch FROM b.ends)::float8, j.job, COALESCE(s.paused, false), s.paused_until,
       r.id, extract(epoch FROM r.tick)::float8, extract(epoch FROM r.started)::float8,
       extract(epoch FROM r.finished)::float8, r.status, r.manual, r.attempts, r.host,
       r.backfill
FROM b
LEFT JOIN unnest(%(jobs)s::text[]) AS j(job) ON true
LEFT JOIN "django_advisory_cron_jobstate" AS s ON s.job = j.job
LEFT JOIN LATERAL (
    (SELECT t.id, t.tick, t.started, t.finished, t.status, t.manual, t.attempts, t.host,
           t.backfill
       FROM "django_advisory_cron_jobrun" AS t
      WHERE t.job = j.job AND t.started >= b.starts AND t.started < b.ends
      ORDER BY t.started DESC, t.id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT e.* FROM (
        SELECT t.id, t.tick, t.started, t.finished, t.status, t.manual, t.attempts, t.host,
           t.backfill
          FROM "django_advisory_cron_jobrun" AS t
         WHERE t.job = j.job AND t.started < b.starts AND t.status <> ALL(%(skips)s::text[])
         ORDER BY t.started DESC, t.id DESC LIMIT 1) AS e
      WHERE COALESCE(e.finished, b.now) > b.starts)
) AS r ON true

-- name: failures_in_a_row
-- How many runs of the job failed since its last success before the run, that run included.
WITH this AS (
    SELECT started, id FROM "django_advisory_cron_jobrun" WHERE id = %(run_id)s AND job = %(job)s
), last_success AS (
    SELECT s.started, s.id FROM "django_advisory_cron_jobrun" AS s, this
     WHERE s.job = %(job)s AND s.status = 'succeeded'
       AND (s.started, s.id) < (this.started, this.id)
     ORDER BY s.started DESC, s.id DESC LIMIT 1
)
SELECT count(*) FROM (
    SELECT 1 FROM "django_advisory_cron_jobrun" AS r, this
     WHERE r.job = %(job)s AND r.status = ANY(%(failing)s::text[])
       AND (r.started, r.id) <= (this.started, this.id)
       AND r.started >= COALESCE((SELECT started FROM last_success), '-infinity')
       AND NOT EXISTS (SELECT 1 FROM last_success AS l WHERE (l.started, l.id) >= (r.started, r.id))
     ORDER BY r.started DESC, r.id DESC LIMIT %(limit)s) AS streak

-- name: ticked_runs
-- How many runs of its ticks each job has had: its rows that take a tick (what max_runs
-- counts; a skip, an interrupted run given back and a run now are none). The partial unique
-- index on (job, tick) holds exactly those rows. %(besides)s: a run not to count (the one
-- the runner just claimed), or NULL.
SELECT j.job,
       (SELECT count(*) FROM "django_advisory_cron_jobrun"
         WHERE job = j.job AND tick IS NOT NULL AND id IS DISTINCT FROM %(besides)s::bigint
           AND status IN ('running', 'succeeded', 'failed', 'lock_lost', 'timed_out'))
  FROM unnest(%(jobs)s::text[]) AS j(job)

-- name: change_said
-- Who makes the next writes of this transaction to the schedules, and why: the trigger that
-- keeps their versions (migration 0026) reads both; they end with the transaction.
SELECT set_config('advisory_cron.changed_by', %(who)s, true),
       set_config('advisory_cron.change_note', %(note)s, true)
