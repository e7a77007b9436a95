LOOM_URL=${LOOM_URL:-http://127.0.0.1:8080}
curl -sf -X POST "$LOOM_URL/v1/auth.whoami" -H "Authorization: Bearer $LOOM_TOKEN"
echo
curl -sf "$LOOM_URL/v1/ops?toolset=tasks" > tasks-ops.json   # the ops a working agent uses, with their JSON schemas
python3 -c 'import json; print([op["name"] for op in json.load(open("tasks-ops.json"))["ops"]])'
rm tasks-ops.json
