"""``telha check``: the read-only consistency checker (docs/operations.md), the span reverse
index among its checks. See :mod:`telha.check.runner`."""
