"""The provenance viewer's static files (``static/``), served at ``/ui/`` by
:mod:`telha.rest.ui_routes` (docs/viewer.md)."""
