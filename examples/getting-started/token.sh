# example-needs: port 8080 free and no Loom running on this data dir (it starts its own `./loom up`)
./loom up &
export LOOM_TOKEN=$(./loom admin bootstrap --org acme --namespace private)
export LOOM_URL=http://localhost:8080 LOOM_ORG=acme LOOM_NAMESPACE=private
