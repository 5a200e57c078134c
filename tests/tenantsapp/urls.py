"""The admin and the app's views (its health and metrics documents)."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("cron/", include("django_advisory_cron.urls")),
]
