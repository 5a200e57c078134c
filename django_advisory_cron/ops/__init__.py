"""The read side: status, held locks, metrics, monitoring and charts."""
