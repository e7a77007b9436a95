LOOM_URL=${LOOM_URL:-http://127.0.0.1:8080}
curl -sf -X POST "$LOOM_URL/v1/auth.whoami" -H "Authorization: Bearer $LOOM_TOKEN"
echo
# A task id that is well formed but names no task: 404 RESOURCE_NOT_FOUND.
curl -s -o not-found.json -w '%{http_code}\n' -X POST "$LOOM_URL/v1/task.get" \
  -H "Authorization: Bearer $LOOM_TOKEN" -H 'Content-Type: application/json' -d '{"task_id": "nosuchtask0000"}'
cat not-found.json && echo   # {"error":{"code":"RESOURCE_NOT_FOUND",...,"retryable":false}}
grep -q '"code":"RESOURCE_NOT_FOUND"' not-found.json && rm not-found.json
