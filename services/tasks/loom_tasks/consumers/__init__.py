"""The plane's NATS-driven workers: pull wake-ups and the lease sweep."""
