# example-needs: a terminal of its own (`./loom up` serves in the foreground; the runner's own `loom up` and CI's `./loom test` stand for these two)
./loom up      # run Loom embedded: every plane, chDB, a nats-server child, gateway and dashboard on :8080
./loom test    # the lint and the whole test suite (./loom test ARGS: pytest ARGS only)
