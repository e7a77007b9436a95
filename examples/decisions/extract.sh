# example-needs: an OpenAI-compatible model endpoint (LOOM_LLM_URL)
loom decisions extract --org "$LOOM_ORG" --namespace "$LOOM_NAMESPACE" --source-uri docs/design.md
loom decisions extract --org "$LOOM_ORG" --namespace "$LOOM_NAMESPACE" --source-uri docs/design.md --apply
