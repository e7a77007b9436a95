"""Identity reads nothing from the bus itself: the grant and revocation pushes its ops publish
are consumed by core's `Authenticator` (loom_core.identity.authenticator, on the runtime's
broker) in every replica."""
