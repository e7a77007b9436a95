"""Bus readers of the decisions plane (none yet: every write is synchronous)."""
