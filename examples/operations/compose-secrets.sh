# example-needs: Docker with Compose
cp .env.example .env
openssl rand -hex 32   # LOOM_JWT_SECRET
openssl rand -hex 16   # CLICKHOUSE_PASSWORD
openssl rand -hex 24   # LOOM_NATS_INTERNAL_PASSWORD
docker compose build gateway
# the auth callout's account key pair: the seed for Loom, the public key for nats-server
docker compose run --rm --no-deps --entrypoint python gateway -c \
  'import os, nkeys; s = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_ACCOUNT); print("LOOM_NATS_AUTH_CALLOUT_ISSUER_SEED=" + s.decode()); print("NATS_AUTH_CALLOUT_ISSUER=" + nkeys.from_seed(s).public_key.decode())'
