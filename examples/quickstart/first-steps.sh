# example-needs: port 8080 free and no Loom running on this data dir (it starts its own `./loom up`)
./loom up &                                                        # Ctrl-C (or kill %1) stops it
export LOOM_TOKEN=$(./loom admin bootstrap --org acme --namespace private)  # the first admin token
curl -s -X POST localhost:8080/v1/auth.whoami -H "Authorization: Bearer $LOOM_TOKEN"
curl -s localhost:8080/v1/ops | head                               # every op, with its JSON schemas
