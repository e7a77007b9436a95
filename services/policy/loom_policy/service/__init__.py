"""Use cases of the policy plane: the rule set (rules.py), dry-run and replay (evaluation.py),
recorded decisions (decisions.py), and the gate (gate.py) over the rule book (rulebook.py) and
the live history (live_history.py)."""
