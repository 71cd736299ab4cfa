"""The pure domain layer: Telha's model and rules, with no I/O.

Everything here is plain data and functions over it — the model records, identity and
hashing, canonical text, submission validation, dedup and blocklist predicates, the
stream-part and lease transition rules, the retry policy, the erasure node plan. Storage,
ingest, the queue and both fronts depend on this package; it imports none of them (an
import-linter contract in ``make lint`` enforces it; see ``docs/architecture.md``).
"""
