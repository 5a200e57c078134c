"""System checks: settings, the lock database, jobs, and connection pooling."""
