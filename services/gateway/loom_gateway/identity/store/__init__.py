"""The identity tables (orgs, namespaces, grants, service accounts, revocations) are core's
(`loom_core.identity.store.IdentityStore` and its migrations): every plane's interceptor chain
reads them. The identity ops write them through that store."""
