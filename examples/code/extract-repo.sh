# example-needs: an OpenAI-compatible model endpoint (LOOM_LLM_URL) and acme/widgets indexed (examples/code/index.sh)
loom decisions extract --org "$LOOM_ORG" --namespace "$LOOM_NAMESPACE" --source-uri docs/design.md --repo acme/widgets
loom decisions extract --org "$LOOM_ORG" --namespace "$LOOM_NAMESPACE" --source-uri docs/design.md --repo acme/widgets --into source --apply
