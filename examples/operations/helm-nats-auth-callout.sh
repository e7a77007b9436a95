# example-needs: Helm, a Kubernetes cluster and my-values.yaml
helm dependency build deploy/helm/loom
helm install loom deploy/helm/loom -n agents -f deploy/helm/loom/values-nats-auth-callout.yaml -f my-values.yaml
