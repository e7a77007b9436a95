"""Identity rules, pure: timestamps as the ops show them, token id prefixes. The name,
subject and role grammar is core's (`loom_core.names`); delegation is core's
(`loom_core.identity.delegation`), since every plane's chain verifies what it produces."""
