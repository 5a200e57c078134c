"""URLs of the example site: the admin shows the run history and held locks."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
