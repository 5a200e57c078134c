"""App configuration: registers the system checks and imports every app's jobs module."""

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate
from django.utils.module_loading import autodiscover_modules
from django.utils.translation import gettext_lazy as _


class AdvisoryCronConfig(AppConfig):
    name = "django_advisory_cron"
    label = "django_advisory_cron"
    verbose_name = _("Advisory cron")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, conf

        checks.register()
        if conf.get("SYNC_ON_MIGRATE") and apps.is_installed("django_q"):
            from .contrib.django_q import sync_after_migrate

            post_migrate.connect(sync_after_migrate, sender=self)
        module = conf.get("JOBS_MODULE")
        if isinstance(module, str) and module.isidentifier():
            autodiscover_modules(module)
