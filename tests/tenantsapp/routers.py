"""A project's own tenant router (django-tenants' ``TENANT_SYNC_ROUTER``), for check E081."""

from django_tenants.routers import TenantSyncRouter


class Router(TenantSyncRouter):  # type: ignore[misc]
    """django-tenants' router, under the project's name."""
