# example-needs: Helm and a Kubernetes cluster
helm dependency build deploy/helm/loom      # fetches the official NATS chart into charts/
helm install loom deploy/helm/loom -n agents --create-namespace
kubectl -n agents rollout status deploy/loom-gateway
kubectl -n agents exec deploy/loom-gateway -- loom admin bootstrap --org acme --namespace private
kubectl -n agents port-forward svc/loom-gateway 8080:8080
