-- The principals an API key acts for (docs/rest-api.md, "Principals"): a JSON array of
-- principal strings, sorted; NULL: none (the key sees its whole scope). A request's
-- x-telha-principals header may only narrow them.
ALTER TABLE api_keys ADD COLUMN principals text;
