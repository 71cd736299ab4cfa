"""Job retention at run time (docs/operations.md, "Retention"): the
:class:`~telha.retention.collector.Retention` actor, which runs a pass every
``jobs.gc_interval_s``, and the pass itself (:func:`~telha.retention.collector.run_pass`),
which ``telha gc`` also runs. What a pass removes, one transaction at a time, is in
:mod:`telha.storage`."""
