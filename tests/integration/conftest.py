"""Integration fixtures: ``tenant`` and ``worker`` need a module's ``queue_srv`` fixture."""

from tests.support.queue_env import tenant, worker

__all__ = ["tenant", "worker"]
