"""Webhooks at run time (docs/operations.md, "Webhooks"): the
:class:`~telha.webhooks.deliverer.Deliverer` actor and the checked connections it POSTs over
(:mod:`telha.webhooks.checked_transport`). The pure rules (subscriptions' events, the
signing secret, the retry schedule) are :mod:`telha.domain.webhooks`; the deliveries' rows
and transactions are in :mod:`telha.storage`."""
