"""The rule language, pure: parse (JSON -> syntax tree, 422 naming the bad path), compile
(leaf evaluators, the caller pin, the history shape a rule needs), evaluate (Kleene logic over
an in-memory history), widening, and replay over a recorded ledger."""
