"""Prometheus metrics computed from the run history at scrape time (``prometheus_client``).

``runlocked`` processes live for a second and replicas are many, so in-process counters
would each hold a sliver of the truth; the run history holds all of it. Each scrape reads
it through [job_statuses][django_advisory_cron.ops.status.job_statuses], the function behind
``cronstatus --json``: three queries whatever the number of jobs and the size of the
history (one statement for each job's last run, last success and runs per status in the
``METRICS_WINDOW`` and how late they started; one for the held locks; one for the jobs'
states; with per-tenant jobs, one more for the tenants). Each per-job series is labelled by
``job`` and ``tenant`` (``LABELS``). The overdue, late, stuck and failing flags are the very
ones ``cronstatus`` reports.

Serve it with the ``metrics/`` view (``django_advisory_cron.urls``), or register
[RunHistoryCollector][django_advisory_cron.ops.metrics.RunHistoryCollector] in a registry of your
own, such as the default one django-prometheus exposes::

    from prometheus_client import REGISTRY
    REGISTRY.register(RunHistoryCollector())
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from ..conf import app_settings
from ..models import RunStatus
from .status import job_statuses

PREFIX = "advisory_cron_job_"
#: Each per-job series' labels: the job, as its runs are recorded (a tenant's run of a
#: per-tenant job ``name@schema``, as ``cronstatus`` names it), and its tenant's schema (empty
#: for a job that is not per tenant), so that a query sums or filters by tenant.
LABELS = ("job", "tenant")


def _families() -> dict[str, GaugeMetricFamily]:
    window = f"{app_settings.METRICS_WINDOW:g}"
    job = list(LABELS)
    return {
        "last_success": GaugeMetricFamily(
            f"{PREFIX}last_success_timestamp_seconds",
            "Start of the job's last successful run (Unix time).",
            labels=job,
        ),
        "last_run": GaugeMetricFamily(
            f"{PREFIX}last_run_timestamp_seconds",
            "Start of the job's last run that was not a skip (Unix time).",
            labels=job,
        ),
        "last_duration": GaugeMetricFamily(
            f"{PREFIX}last_run_duration_seconds",
            "Duration of the job's last finished run.",
            labels=job,
        ),
        "runs": GaugeMetricFamily(
            f"{PREFIX}runs",
            f"Runs and recorded skips of the job started in the last {window} seconds "
            "(METRICS_WINDOW), by status.",
            labels=[*LABELS, "status"],
        ),
        "next_tick": GaugeMetricFamily(
            f"{PREFIX}next_tick_timestamp_seconds",
            "The job's next scheduled tick (Unix time).",
            labels=job,
        ),
        "held": GaugeMetricFamily(
            f"{PREFIX}held", "1 while a process holds the job's lock.", labels=job
        ),
        "overdue": GaugeMetricFamily(
            f"{PREFIX}overdue",
            "1 when the job's latest due tick has no successful run (as cronstatus says).",
            labels=job,
        ),
        "late": GaugeMetricFamily(
            f"{PREFIX}late",
            "1 when the job's runs start later after their ticks than its late_after target "
            "(as cronstatus says).",
            labels=job,
        ),
        "stuck": GaugeMetricFamily(
            f"{PREFIX}stuck",
            "1 when the job's lock is held longer than its max_runtime (or STALE_AFTER).",
            labels=job,
        ),
        "failing": GaugeMetricFamily(
            f"{PREFIX}failing", "1 when the job's last run failed or lost its lock.", labels=job
        ),
    }


def _lateness() -> HistogramMetricFamily:
    return HistogramMetricFamily(
        f"{PREFIX}start_lateness_seconds",
        "How late the job's runs started after their ticks, those started in the last "
        f"{app_settings.METRICS_WINDOW:g} seconds (METRICS_WINDOW).",
        labels=list(LABELS),
    )


class RunHistoryCollector(Collector):
    """A custom collector: every ``collect()`` reads the run history once."""

    def describe(self) -> Iterator[Metric]:
        """The metric families without samples, so registering does not query the database."""
        yield from _families().values()
        yield _lateness()

    def collect(self) -> Iterator[Metric]:
        families, lateness = _families(), _lateness()
        for item in job_statuses(window=app_settings.METRICS_WINDOW):
            labels = [item.name, item.job.tenant or ""]  # LABELS
            last = item.last_run
            if item.last_success is not None:
                families["last_success"].add_metric(labels, item.last_success.timestamp())
            if last is not None:
                families["last_run"].add_metric(labels, last.started.timestamp())
                if last.duration is not None:
                    families["last_duration"].add_metric(labels, last.duration)
            counts = item.run_counts or {}
            for status in RunStatus.values:
                families["runs"].add_metric([*labels, status], counts.get(status, 0))
            next_tick = item.next_tick
            if next_tick is not None:
                families["next_tick"].add_metric(labels, next_tick.timestamp())
            families["held"].add_metric(labels, int(item.holder is not None))
            families["overdue"].add_metric(labels, int(item.overdue))
            families["late"].add_metric(labels, int(item.late))
            families["stuck"].add_metric(labels, int(item.stuck))
            families["failing"].add_metric(labels, int(item.failing))
            late = item.lateness
            if late is not None:
                buckets = [(repr(bound), runs) for bound, runs in late.at_or_below]
                lateness.add_metric(labels, [*buckets, ("+Inf", late.runs)], sum_value=late.seconds)
        yield from families.values()
        yield lateness


def exposition() -> bytes:
    """The metrics in Prometheus' text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunHistoryCollector())
    return generate_latest(registry)
