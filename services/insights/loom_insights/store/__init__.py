"""SQL and schema: the secrets and canary tables, the analyst and admin connections."""
