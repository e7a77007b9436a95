"""Use cases of the identity ops: namespaces, grants and service accounts (access.py), token
minting, revocation and the bootstrap of an org (tokens.py)."""
