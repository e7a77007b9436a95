# example-needs: Docker with Compose
docker compose up -d                   # NATS and ClickHouse first, then the planes, then the gateway
docker compose ps                      # every service "healthy"
curl -s localhost:8080/v1/health/ready
docker compose exec gateway loom admin bootstrap --org acme --namespace private   # the first admin token
