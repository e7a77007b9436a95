# example-needs: Docker with Compose and LibreChat
# in .env: the five LIBRECHAT_* values (LOOM_ASSISTANT_LIBRECHAT_URL is http://librechat:3080 by default)
docker compose --profile assistant up -d
