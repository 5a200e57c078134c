"""Held advisory locks: the SQL view's rows, annotated with what only Python knows.

The view (migration 0002) joins the server's lock table with ``pg_stat_activity``. Job names, their
``max_runtime`` and the namespace live in the registry and the settings, so they are added here
as ``CASE`` expressions whose values are query parameters: one query returns each lock with its
job name, how long it has been held and whether it is stale, and the admin can filter, sort and
paginate on those columns in SQL.

How long a lock has been held: PostgreSQL records when a lock was *requested*
(``waitstart``, while waiting) but not when it was granted. For a lock taken by our runner the
``running`` history row is inserted by the very statement that takes the lock, so its
``started`` is exact; for any other lock we use the connection's start, an upper bound.
"""

from __future__ import annotations

from typing import Any

from django.db.models import (
    BooleanField,
    Case,
    CharField,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Now, Substr

from ..conf import app_settings
from ..db import pooler, sql
from ..db.aliases import lock_database
from ..db.execute import fetch_all
from ..jobs.job import Job, registry
from ..models import HeldLock, JobRun, RunStatus


class ArrayMap(Func):
    """``(values)[array_position(keys, expression)]``: a dictionary lookup done in SQL.

    Keys and values travel as two array parameters, so the SQL text stays the same size
    whatever the number of jobs (a ``CASE`` per job grew it with every job, and Django repeats
    an annotation's SQL wherever another annotation, a filter or the ordering uses it). Each
    is written once as the text of an array (``_array_text``), and the driver sends that one
    string wherever the annotation is repeated, rather than quoting every element anew
    (fifteen times 200 jobs made most of the Jobs page's time in this query).
    """

    def __init__(
        self,
        expression: Any,
        keys: list[Any],
        values: list[Any],
        key_type: str,
        value_type: str,
        output_field: Any,
    ) -> None:
        super().__init__(expression, output_field=output_field)
        self.keys, self.values = _array_text(keys), _array_text(values)
        self.key_type, self.value_type = key_type, value_type

    def as_sql(  # type: ignore[override]
        self, compiler: Any, connection: Any, *args: Any, **kwargs: Any
    ) -> tuple[str, list[Any]]:
        sql, params = compiler.compile(self.get_source_expressions()[0])
        keys = f"%s::{self.key_type}[]"
        if self.key_type == "hashtext":
            # hashtext() is int4, sign-extended to the bigint key pg_advisory_lock received.
            keys = "ARRAY(SELECT hashtext(name)::bigint FROM unnest(%s::text[]) AS name)"
        template = f"(%s::{self.value_type}[])[array_position({keys}, {sql})]"
        return template, [self.values, self.keys, *params]


def _array_text(items: list[Any]) -> str:
    """``items`` as PostgreSQL reads an array: each element double-quoted, its backslashes
    and double quotes escaped (a name may hold any character)."""
    quoted = (str(item).replace("\\", "\\\\").replace('"', '\\"') for item in items)
    return "{" + ",".join(f'"{item}"' for item in quoted) + "}"


def _job_name(jobs: list[Job[Any, Any]], namespace: int) -> Any:
    """The name of the registered job whose key a lock-table row holds, else NULL: any of
    its run slots' (a job that may run several times at once has one key per run)."""
    keys = [key for job in jobs for key in job.keys]
    two_int = [(key.lock_ids, key.name) for key in keys if key.lock_ids]
    hashed = [key for key in keys if key.lock_ids is None]
    whens = []
    if two_int:
        objids = [ids[1] for ids, _name in two_int]
        names = [name for _ids, name in two_int]
        lookup = ArrayMap(F("objid"), objids, names, "bigint", "text", CharField())
        whens.append(When(Q(objsubid=2, classid=namespace), then=lookup))
    if hashed:
        texts, names = [key.text for key in hashed], [key.name for key in hashed]
        lookup = ArrayMap(F("bigkey"), texts, names, "hashtext", "text", CharField())
        whens.append(When(Q(objsubid=1), then=lookup))
    if not whens:
        return Value(None, output_field=CharField())
    return Case(*whens, default=Value(None), output_field=CharField())


def _running(column: str) -> Subquery:
    runs = JobRun.objects.filter(job=OuterRef("job"), status=RunStatus.RUNNING)
    return Subquery(runs.order_by("-started", "-id").values(column)[:1])


def _lock_name() -> Any:
    """The name of a lock taken with ``advisory_lock()``, from its connection's
    ``application_name`` (see [try_lock][django_advisory_cron.db.sql.try_lock]), else NULL."""
    prefix = sql.LOCK_APPLICATION_NAME
    return Case(
        When(
            application_name__startswith=prefix,
            then=Substr("application_name", len(prefix) + 1),
        ),
        default=Value(None),
        output_field=CharField(),
    )


def _probe() -> Any:
    """Whether a lock-table row is the shared lock the pooling probe leaves, by design, on a
    transaction-pooled server connection (see [probe][django_advisory_cron.db.pooler.probe]):
    nothing can free it but the pooler, so it is named, and never stale. (A ``hashtext`` key
    is the server's to know: such a lock shows as an unknown one.)"""
    ids = pooler.probe_key().lock_ids
    if ids is None:
        return Value(False, output_field=BooleanField())
    classid, objid, objsubid = ids
    return ExpressionWrapper(
        Q(classid=classid, objid=objid, objsubid=objsubid, mode="ShareLock"),
        output_field=BooleanField(),
    )


def annotate(queryset: QuerySet[HeldLock]) -> QuerySet[HeldLock]:
    """Add ``job``, ``lock_name``, ``probe``, ``ours``, ``run_started/host/pid``, ``since``,
    ``held_for``, ``limit``, ``stale``."""
    jobs = registry.all()
    namespace = app_settings.NAMESPACE & 0xFFFFFFFF
    limited = [job for job in jobs if job.max_runtime is not None]
    seconds: Any = Value(float(app_settings.STALE_AFTER), output_field=FloatField())
    if limited:
        own = ArrayMap(
            F("job"),
            [job.name for job in limited],
            [float(job.max_runtime or 0) for job in limited],
            "text",
            "float8",
            FloatField(),
        )
        seconds = Coalesce(own, seconds, output_field=FloatField())
    has_job = Q(job__isnull=False)
    return queryset.annotate(
        job=_job_name(jobs, namespace),
        lock_name=_lock_name(),
        probe=_probe(),
        ours=ExpressionWrapper(
            has_job | Q(objsubid=2, classid=namespace), output_field=BooleanField()
        ),
        run_started=Case(When(has_job, then=_running("started")), output_field=DateTimeField()),
        run_host=Case(When(has_job, then=_running("host")), output_field=CharField()),
        run_pid=Case(When(has_job, then=_running("pid")), output_field=IntegerField()),
        since=Case(
            When(granted=False, then=F("waitstart")),
            default=Coalesce(F("run_started"), F("backend_start")),
            output_field=DateTimeField(),
        ),
        held_for=ExpressionWrapper(Now() - F("since"), output_field=DurationField()),
        limit=Func(
            seconds, template="make_interval(secs => %(expressions)s)", output_field=DurationField()
        ),
        stale=ExpressionWrapper(
            Q(granted=True, held_for__gt=F("limit"), probe=False), output_field=BooleanField()
        ),
    )


def held_locks(using: str | None = None) -> QuerySet[Any]:
    """All advisory locks in the lock database (or ``using``), annotated (see ``annotate()``).

    The way to read held locks: ``HeldLock.objects`` alone reads the default database and
    knows nothing of jobs. Typed loosely on purpose: callers filter on the annotations
    (``job``, ``stale``...), which static model checks cannot see.
    """
    return annotate(HeldLock.objects.using(lock_database(using)))


def holder(job: str, using: str | None = None) -> str:
    """Who holds ``job``'s lock now, as the Held locks page knows it, else ``""``: the run's
    host and pid when a recorded run holds it, and the backend (``backend pid 4711
    (application name, client 10.0.0.5)``), as a skip row of a lock held elsewhere names it."""
    lock = held_locks(using).filter(job=job, granted=True).first()
    if lock is None:
        return ""
    about = ", ".join(
        filter(None, [lock.application_name, lock.client_addr and f"client {lock.client_addr}"])
    )
    backend = f"backend pid {lock.pid}" + (f" ({about})" if about else "")
    run_host = getattr(lock, "run_host", None)
    if run_host:
        return f"the run on host {run_host} pid {getattr(lock, 'run_pid', '')}, {backend}"
    return backend


def terminate(pids: list[int]) -> tuple[list[int], list[int]]:
    """Terminate the backends among ``pids`` that hold an advisory lock right now.

    Checking and terminating happen in one statement, so a pid that let its lock go (or a pid
    reused since the page was rendered) is refused, as is our own backend. Returns
    ``(terminated, refused)``.
    """
    rows = fetch_all(app_settings.lock_database, sql.terminate_holders(pids))
    done = sorted(int(pid) for pid, ok in rows if ok)
    refused = sorted(set(pids) - set(done))
    return done, refused
