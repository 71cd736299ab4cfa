-- A version the full-text index could not be filled with (its canonical text missing, a
-- span row out of range, labels that do not decode) is marked done with why, so the search
-- indexer does not try it again and `telha check` lists it (docs/operations.md, "Bad
-- rows"). NULL: not failed. A new current version of the source clears it.
ALTER TABLE search_sources ADD COLUMN failure TEXT;
