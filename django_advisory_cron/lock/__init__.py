"""Advisory locks: ``advisory_lock()``, session and transaction scope, the heartbeat."""
