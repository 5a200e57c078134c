"""Test settings for ``cronjob import --from django-q2`` with the cluster in a zone of its own
(``Q_CLUSTER["time_zone"]``), which django-q2 reads its schedules in, beside ``TIME_ZONE``
UTC."""

from tests.settings_import import *  # noqa: F403
from tests.settings_import import Q_CLUSTER

Q_CLUSTER = {**Q_CLUSTER, "time_zone": "Europe/Berlin"}
