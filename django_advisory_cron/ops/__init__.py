"""What operators look at (status, held locks, metrics, monitoring, charts) and what they say
about a job (pause, resume, run now: `control`)."""
