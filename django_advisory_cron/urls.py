"""``path("cron/", include("django_advisory_cron.urls"))`` serves ``health/`` and ``metrics/``."""

from django.urls import path

from . import views

app_name = "advisory_cron"

urlpatterns = [
    path("health/", views.health, name="health"),
    path("metrics/", views.metrics, name="metrics"),
]
