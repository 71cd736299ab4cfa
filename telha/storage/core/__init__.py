"""Storage operations written once for both engines (docs/architecture.md, "The storage seam")."""
