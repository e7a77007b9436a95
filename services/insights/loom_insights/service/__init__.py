"""Use cases: the analysis service, provisioning, the probe and the secrets row."""
