-- The claim function as migration 0016 installed it, kept as it was: migration 0027 undone
-- installs it again (0027 replaced it with the one in db/queries.sql).
CREATE OR REPLACE FUNCTION django_advisory_cron_claim(
    _jobs text[], _classids int[], _objids int[], _hashed text[], _refs timestamptz[],
    _manual boolean[], _task_ids text[], _once boolean[], _match_n bigint[],
    _match_at timestamptz[], _match_tick timestamptz[], _skew float8, _host text, _pid int,
    _transaction boolean, _lease float8, _final boolean, _settle boolean, _record boolean,
    _synchronous_commit text)
RETURNS TABLE (released boolean, got boolean, run_id bigint, tick timestamptz,
               reference timestamptz, interrupted bigint, live bigint, paused text)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $claim$
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
), l AS (
    SELECT i.*, p.why, COALESCE(v.n, 0) AS live, COALESCE(i.ref, now()) AS reference,
           CASE WHEN p.why IS NOT NULL OR v.n IS NOT NULL THEN false WHEN NOT _transaction
                AND i.hashed IS NULL THEN pg_try_advisory_lock(i.classid, i.objid)
                WHEN NOT _transaction THEN pg_try_advisory_lock(hashtext(i.hashed))
                WHEN i.hashed IS NULL THEN pg_try_advisory_xact_lock(i.classid, i.objid)
                ELSE pg_try_advisory_xact_lock(hashtext(i.hashed)) END AS got
      FROM i LEFT JOIN paused p USING (n) LEFT JOIN live v USING (job)
), m AS (
    SELECT DISTINCT ON (c.n) c.n, c.tick
      FROM unnest(_match_n, _match_at, _match_tick) AS c(n, at, tick) JOIN l ON l.n = c.n
     WHERE abs(extract(epoch FROM c.at - l.reference)) <= _skew
     ORDER BY c.n, abs(extract(epoch FROM c.at - l.reference))
), t AS (
    SELECT l.*, m.tick FROM l LEFT JOIN m ON m.n = l.n
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
      FROM t WHERE t.got AND NOT (t.once AND EXISTS (
        SELECT FROM "django_advisory_cron_jobrun" r WHERE r.job = t.job AND r.tick = t.tick
           AND r.status IN ('interrupted', 'running')))
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
           COALESCE(o.why, CASE WHEN o.live > 0
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
SELECT CASE WHEN o.settled AND o.hashed IS NULL THEN pg_advisory_unlock(o.classid, o.objid)
            WHEN o.settled THEN pg_advisory_unlock(hashtext(o.hashed)) ELSE false END,
       o.got, o.id, o.tick, o.reference, o.interrupted, o.live, o.why
  FROM o ORDER BY o.n;
END
$claim$
