"""``telha check``: the read-only consistency checker (issue 8 item 3; spec 004 "success
metrics": the reverse-index consistency checker). See :mod:`telha.check.runner`."""
