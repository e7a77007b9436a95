"""The ops, as the handlers call them: authorisation, rules from domain/, SQL from store/,
and every task change through the engine (lease row first, then the row)."""
