"""Re-export of :data:`telha.storage.core.reads.VERSION_COLS` for the modules that still
import it from here; the reads themselves are :mod:`telha.storage.core.reads`."""

from telha.storage.core.reads import VERSION_COLS

__all__ = ["VERSION_COLS"]
