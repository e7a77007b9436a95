"""Use cases: decision and memory ops over the store, the lease store and the embedder."""
