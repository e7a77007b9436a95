# example-needs: Docker with Compose and a git checkout
git pull && docker compose build && docker compose up -d
