"""domain."""
