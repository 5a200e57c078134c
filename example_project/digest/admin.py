"""Admin pages for what the example's jobs wrote (the run history is the app's own admin)."""

from django.contrib import admin

from .models import BouncePoll, DigestEmail, DigestStats

# ModelAdmin is generic only in the type stubs; subscripting it fails at run time.


@admin.register(DigestEmail)
class DigestEmailAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["user", "sent_at", "replica"]
    list_filter = ["replica"]


@admin.register(DigestStats)
class DigestStatsAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["computed_at", "replica", "digests"]


@admin.register(BouncePoll)
class BouncePollAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["polled_at", "replica", "pid"]
    list_filter = ["replica"]
