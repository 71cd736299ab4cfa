"""The webhooks aggregate of the store (docs/architecture.md, "The storage seam"): its
component (``aggregate``), its role (``role``) and its transaction functions."""
