curl -sf "${LOOM_URL:-http://127.0.0.1:8080}/metrics" | grep -c '^loom_requests_total' || true
