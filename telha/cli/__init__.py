"""The ``telha`` command line (docs/cli-and-client.md): the click group and the server's own
commands in :mod:`telha.cli.main` (the ``telha`` console script and ``python -m telha``),
one module per command area beside it. Commands that talk to a running server go through
:mod:`telha.client` only; those that open the store themselves share
:mod:`telha.cli.config`."""
