"""App configuration: registers the system checks, connects the enabled monitoring
integrations, imports every app's jobs module and registers the schedules declared in
``ADVISORY_CRON["SCHEDULES"]``."""

from importlib import import_module

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate
from django.utils.module_loading import module_has_submodule
from django.utils.translation import gettext_lazy as _

from .conf import APP_LABEL, app_settings
from .exceptions import InvalidSchedule


class AdvisoryCronConfig(AppConfig):
    name = APP_LABEL
    label = APP_LABEL
    verbose_name = _("Advisory cron")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .checks import configuration as checks
        from .contrib.tenants import checks as tenants
        from .delivery import targets
        from .jobs import declared
        from .ops import monitoring

        checks.register()
        tenants.register_checks()
        if apps.is_installed("django_tenants"):
            from .contrib.tenants import install

            install()
        monitoring.connect()
        targets.install()  # imports no queue's library: only registers the targets
        if app_settings.SYNC_ON_MIGRATE and apps.is_installed("django_q"):
            from .contrib.django_q import sync_after_migrate

            post_migrate.connect(sync_after_migrate, sender=self)
        module = app_settings.JOBS_MODULE
        if isinstance(module, str) and module.isidentifier():
            import_jobs_modules(module)
        declared.register()  # after the jobs modules: its entries call their jobs


def import_jobs_modules(module: str) -> None:
    """Import ``module`` of every installed app that has one (as Django's own
    ``autodiscover_modules``). A declaration ``@locked_task`` refuses (``schedule=`` with
    ``every=``, a cron that never fires) is kept for the system check E008 instead of ending
    every command, ``check`` included, with a traceback; the other apps' jobs still load."""
    from .jobs.job import registry

    for config in apps.get_app_configs():
        if not module_has_submodule(config.module, module):
            continue
        name = f"{config.name}.{module}"
        try:
            import_module(name)
        except InvalidSchedule as error:
            registry.refused.append((name, str(error)))
