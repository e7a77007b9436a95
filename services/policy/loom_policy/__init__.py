"""History policies: the policy.* ops and the gate every op passes."""
