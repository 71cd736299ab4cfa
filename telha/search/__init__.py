"""Full-text search at run time (docs/architecture.md, "Search"): the
:class:`~telha.search.indexer.SearchIndexer` actor, which does the index's waiting work in
the background. The pure rules (folding, the query language) are
:mod:`telha.domain.folding`, :mod:`telha.domain.search_query` and
:mod:`telha.domain.search_text`; the index's rows and the searches are in
:mod:`telha.storage`."""
