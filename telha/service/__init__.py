"""How ``telha serve`` is put together (docs/architecture.md, "Actors and channels"): the
wiring that builds every actor and nests them in start order (:mod:`telha.service.wiring`:
:func:`~telha.service.wiring.serve` for the process, :func:`~telha.service.wiring.run_service`
for the same wiring in-process), the :class:`~telha.service.supervisor.Supervisor` that
restarts a crashed actor, and the soak's memory probe (:mod:`telha.service.debug_memory`).
Only this package imports :mod:`telha.rest` (import-linter contract
``rest-wired-by-service``)."""
