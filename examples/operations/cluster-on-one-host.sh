# example-needs: openssl, free ports 14221-16223 and 17000-18080, and no Loom on them
export LOOM_NATS_INTERNAL_USER=loom-internal LOOM_NATS_INTERNAL_PASSWORD=$(openssl rand -hex 16) NATS_SYS_USER=loom-internal-sys
eval "$(.venv/bin/python -c 'import os,nkeys; s=nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_ACCOUNT); print("export LOOM_NATS_AUTH_CALLOUT_ISSUER_SEED="+s.decode()+" NATS_AUTH_CALLOUT_ISSUER="+nkeys.from_seed(s).public_key.decode())')"
for i in 1 2 3; do mkdir -p /tmp/n$i; cp deploy/nats/loom-accounts.conf /tmp/n$i/; cat > /tmp/n$i/node.conf <<CONF
server_name: n$i
listen: 127.0.0.1:1422$i
jetstream { store_dir: "/tmp/n$i/js" }
cluster { name: loom, listen: 127.0.0.1:1622$i, routes: [nats-route://127.0.0.1:16221, nats-route://127.0.0.1:16222, nats-route://127.0.0.1:16223] }
include ./loom-accounts.conf
CONF
.venv/bin/nats-server -c /tmp/n$i/node.conf & done
export LOOM_JWT_SECRET=$(openssl rand -hex 32) LOOM_DATA_DIR=/tmp/loom-planes LOOM_NATS_REPLICAS=3 \
  LOOM_NATS_URL=nats://127.0.0.1:14221,nats://127.0.0.1:14222,nats://127.0.0.1:14223
./loom admin bootstrap --org acme --namespace private        # before the planes process holds the store
LOOM_GRPC_PORT_BASE=17000 ./loom serve --planes identity,tasks,policy &   # identity 17000, policy 17001, tasks 17002
LOOM_HTTP_PORT=18080 LOOM_PLANE_ADDRESSES=identity=127.0.0.1:17000,policy=127.0.0.1:17001,tasks=127.0.0.1:17002 \
  ./loom serve --gateway &
curl -s localhost:18080/v1/health/ready
