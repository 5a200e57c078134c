from django.contrib import admin
from django.urls import include, path

from tests import async_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("cron/", include("django_advisory_cron.urls")),
    path("async/locked/", async_views.locked),
    path("async/ping/", async_views.ping),
]
