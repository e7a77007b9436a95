"""Pure rules of the analysis boundary: the allowlist and everything generated from it."""
