"""The pure core: schedules, lock keys and scopes. No database, no models."""
