LOOM_URL=${LOOM_URL:-http://127.0.0.1:8080}
curl -sf "$LOOM_URL/v1/health" && echo
curl -sf "$LOOM_URL/v1/health/ready" && echo
