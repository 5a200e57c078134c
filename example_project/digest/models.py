"""What the example's jobs write, so the demo can count what really happened in the database.

There is deliberately no unique constraint on ``DigestEmail``: if two replicas ran the job,
the duplicates would show up here instead of being hidden by an ``IntegrityError``.
"""

from django.conf import settings
from django.db import models


class DigestEmail(models.Model):
    """One digest "sent" to one user (the example stores it instead of sending mail)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    sent_at = models.DateTimeField(auto_now_add=True)
    replica = models.CharField(max_length=100)

    class Meta:
        ordering = ["sent_at", "id"]

    def __str__(self) -> str:
        return f"digest for {self.user} from {self.replica}"


class DigestStats(models.Model):
    """A snapshot written by the every-minute job; one row per run."""

    computed_at = models.DateTimeField(auto_now_add=True)
    replica = models.CharField(max_length=100)
    digests = models.PositiveIntegerField()

    class Meta:
        ordering = ["computed_at", "id"]
        verbose_name_plural = "digest stats"

    def __str__(self) -> str:
        return f"{self.digests} digests, counted by {self.replica}"


class BouncePoll(models.Model):
    """One poll of the mail provider for bounces, by the every-minute ``poll_bounces`` job.

    Like ``DigestEmail`` it has no unique constraint: two runs of one tick would show here.
    """

    polled_at = models.DateTimeField(auto_now_add=True)
    replica = models.CharField(max_length=100)
    pid = models.PositiveIntegerField()

    class Meta:
        ordering = ["polled_at", "id"]

    def __str__(self) -> str:
        return f"bounce poll by {self.replica} (pid {self.pid})"


class UptimeSample(models.Model):
    """One sample by the 5-second ``sample_uptime`` job, which ``cronworker`` runs.

    No unique constraint either: two runs of one tick would show here.
    """

    sampled_at = models.DateTimeField(auto_now_add=True)
    replica = models.CharField(max_length=100)
    pid = models.PositiveIntegerField()

    class Meta:
        ordering = ["sampled_at", "id"]

    def __str__(self) -> str:
        return f"uptime sample by {self.replica} (pid {self.pid})"
