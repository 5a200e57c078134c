"""No pages: the tenants' tests run commands only."""

urlpatterns: list[object] = []
