"""The job queue: leases, heartbeats, retries with backoff, dead letters (DESIGN.md §6)."""
