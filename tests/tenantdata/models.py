"""The table every tenant's schema has, written by the per-tenant job."""

from django.db import models


class Digest(models.Model):
    #: The schema the run's connection was in, as the job saw it.
    schema = models.CharField(max_length=63)
    written = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.schema} at {self.written}"
