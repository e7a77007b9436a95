"""The gateway: the only HTTP surface. It translates and relays to the planes over gRPC."""
