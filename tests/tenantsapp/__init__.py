"""A django-tenants project's shared app for the per-tenant jobs' tests
(tests/test_tenants.py): the tenant and domain models, and the per-tenant job."""
