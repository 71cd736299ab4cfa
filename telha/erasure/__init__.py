"""GDPR erasure at run time (docs/operations.md, "Erasure"): the
:class:`~telha.erasure.eraser.Eraser` actor, which leases ``erase`` jobs and runs their
steps. The pure parts (the payload, the steps, the node plan) are :mod:`telha.domain.erasure`;
each step's transaction is in :mod:`telha.storage`."""
