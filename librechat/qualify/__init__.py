"""LibreChat qualification: the protocol facts Loom relies on, checked against a real LibreChat."""
