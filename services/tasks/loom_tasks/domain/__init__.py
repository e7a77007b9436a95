"""The task inbox's rules: statuses and moves, trust, argument checks (pure, no I/O)."""
