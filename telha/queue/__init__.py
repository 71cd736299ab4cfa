"""The job queue: leases, heartbeats, retries with backoff, dead letters (docs/architecture.md)."""
