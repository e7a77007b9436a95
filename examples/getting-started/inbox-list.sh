curl -sf -X POST "${LOOM_URL:-http://127.0.0.1:8080}/v1/inbox.list" \
  -H "Authorization: Bearer $LOOM_TOKEN" -H 'Content-Type: application/json' -d '{}'
