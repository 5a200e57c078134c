from django.db import models


class Marker(models.Model):
    """One row per job body execution, written by the job itself."""

    job = models.CharField(max_length=100)
    pid = models.IntegerField()
    note = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.job} by pid {self.pid}"
