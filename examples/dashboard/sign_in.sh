#!/usr/bin/env bash
# Give a person a role in the namespace, then make their one-time sign-in link (single use,
# 15 minutes). Open the printed http://…/login#code=… in a browser to start their session.
set -euo pipefail
LOOM_URL="${LOOM_URL:-http://127.0.0.1:8080}"
curl -sf -X POST "$LOOM_URL/v1/grants.set" \
  -H "Authorization: Bearer $LOOM_TOKEN" -H "X-Loom-Namespace: $LOOM_NAMESPACE" \
  -H "Content-Type: application/json" -d '{"subject": "user:alice", "role": "writer"}' >/dev/null
./loom admin login-link --org "$LOOM_ORG" --subject user:alice
