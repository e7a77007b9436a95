"""Inbox webhooks: signed wake-up notices, the SSRF guard, and the delivery log.

A notice is a POST of a small JSON body to the inbox's webhook_url:

    {"event": "inbox.wake", "delivery_id": "…", "org": "acme", "namespace": "private",
     "inbox": "private-bot", "newest_seq": 1234, "count": 3, "sent_at": 1767225600}

with headers `X-Loom-Signature: t=<unix>,v1=<hex>` (HMAC-SHA256 over `<t>.<body>` keyed with
the inbox's webhook secret; see `verify_signature`), `X-Loom-Delivery` and `X-Loom-Event`.
It carries no task content: the receiver pulls.
"""

from ._config import encode_org, secret_ref_is_valid, url_problem, validate_webhook_config, webhook_secret_env_name
from ._deliverer import DURABLE, STREAM, WEBHOOKS, WebhookDeliverer, WebhookLookup
from ._guard import AddressRefused, check_host, refusal
from ._signing import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, sign, verify_signature
from ._store import MIGRATIONS, Attempt, list_deliveries

__all__ = [
    "DELIVERY_HEADER",
    "DURABLE",
    "EVENT_HEADER",
    "MIGRATIONS",
    "SIGNATURE_HEADER",
    "STREAM",
    "WEBHOOKS",
    "AddressRefused",
    "Attempt",
    "WebhookDeliverer",
    "WebhookLookup",
    "check_host",
    "encode_org",
    "list_deliveries",
    "refusal",
    "secret_ref_is_valid",
    "sign",
    "url_problem",
    "validate_webhook_config",
    "verify_signature",
    "webhook_secret_env_name",
]
