# example-needs: the data dir of the Loom it bootstraps (the runner bootstraps its own)
./loom admin bootstrap --org acme --namespace private
