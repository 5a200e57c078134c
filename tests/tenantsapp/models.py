"""The tenant model (one PostgreSQL schema each, made when a tenant is saved, dropped when it
is deleted) and its domains."""

from django.db import models
from django_tenants.models import DomainMixin, TenantMixin


class Client(TenantMixin):  # type: ignore[misc]
    name = models.CharField(max_length=100)
    auto_create_schema = True
    auto_drop_schema = True


class Domain(DomainMixin):  # type: ignore[misc]
    pass
