# example-needs: Docker with Compose and LibreChat
# in .env: LOOM_ASSISTANT_LIBRECHAT_URL=http://librechat:3080 and the five LIBRECHAT_* values
docker compose --profile assistant up -d
