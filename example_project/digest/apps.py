from django.apps import AppConfig


class DigestConfig(AppConfig):
    name = "digest"
    verbose_name = "Digest"
    default_auto_field = "django.db.models.BigAutoField"
