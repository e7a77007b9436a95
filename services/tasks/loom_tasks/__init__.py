"""The task inbox plane (spec 003, "Task inbox"): `inbox.*` and `task.*`."""
