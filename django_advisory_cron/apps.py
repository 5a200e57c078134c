"""App configuration: registers the system checks, connects the enabled monitoring
integrations and imports every app's jobs module."""

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate
from django.utils.module_loading import autodiscover_modules
from django.utils.translation import gettext_lazy as _

from .conf import APP_LABEL, app_settings


class AdvisoryCronConfig(AppConfig):
    name = APP_LABEL
    label = APP_LABEL
    verbose_name = _("Advisory cron")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .checks import configuration as checks
        from .contrib.tasks import install as install_tasks_delivery
        from .ops import monitoring

        checks.register()
        monitoring.connect()
        install_tasks_delivery()  # imports no Tasks framework: only registers the deliverer
        if app_settings.SYNC_ON_MIGRATE and apps.is_installed("django_q"):
            from .contrib.django_q import sync_after_migrate

            post_migrate.connect(sync_after_migrate, sender=self)
        module = app_settings.JOBS_MODULE
        if isinstance(module, str) and module.isidentifier():
            autodiscover_modules(module)
