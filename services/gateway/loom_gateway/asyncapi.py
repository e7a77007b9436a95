"""GET /asyncapi.json: FastStream's AsyncAPI document of every NATS subject Loom publishes or
consumes: core's, and the planes' gathered through the `loom.asyncapi` entry point
(`name = "pkg.module:declare"`, a function that declares its publishers and consumers on a
FastStream NatsBroker; `BusLayout.describe` does the consumers).
The dashboard renders it at /asyncapi from assets the gateway serves (web.py): no CDN."""

from __future__ import annotations

import functools
import logging
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from loom_core.bus import auth_callout
from loom_core.chain import ledger
from loom_core.identity import authenticator

log = logging.getLogger(__name__)


def public_nats_url(url: str) -> str:
    """A NATS URL (or a comma-separated list) without its credentials: the document is public."""
    out = []
    for one in url.split(","):
        parts = urlsplit(one.strip())
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
        out.append(urlunsplit((parts.scheme or "nats", netloc, parts.path, "", "")))
    return ",".join(out)


@functools.cache
def document(nats_url: str) -> dict[str, Any]:
    """The document whose server is `nats_url` (the configured one, as subscribers reach it)."""
    from faststream.nats import NatsBroker
    from faststream.specification import AsyncAPI

    broker = NatsBroker(public_nats_url(nats_url).split(","))
    # Core's own subjects, on every replica: revocations and grant changes, the ledger's
    # batches, the NATS auth callout's requests.
    for layout in (authenticator.LAYOUT, ledger.LAYOUT, auth_callout.LAYOUT):
        layout.describe(broker)
    for ep in entry_points(group="loom.asyncapi"):
        try:
            ep.load()(broker)
        except Exception:  # noqa: BLE001 - one plane's document never hides the others'
            log.warning("asyncapi: %s did not declare its subjects", ep.name)
    spec = AsyncAPI(broker, title="Loom events (NATS)", version="1.0.0", schema_version="3.0.0").to_specification()
    jsonable: dict[str, Any] = spec.to_jsonable()
    return jsonable


def router(nats_url: str) -> APIRouter:
    """GET /asyncapi.json, naming `nats_url` as the server (the dashboard renders /asyncapi)."""
    routes = APIRouter()

    @routes.get("/asyncapi.json", include_in_schema=False)
    async def asyncapi_json() -> JSONResponse:
        return JSONResponse(document(nats_url))

    return routes
