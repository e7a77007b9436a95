"""GET /asyncapi.json: FastStream's AsyncAPI document of the NATS subjects Loom publishes for
subscribers, gathered from the planes through the `loom.asyncapi` entry point
(`name = "pkg.module:declare"`, a function that declares publishers on a FastStream NatsBroker).
The dashboard renders it at /asyncapi from assets the gateway serves (web.py): no CDN."""

from __future__ import annotations

import functools
import logging
from importlib.metadata import entry_points
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

log = logging.getLogger(__name__)
router = APIRouter()


@functools.cache
def document() -> dict[str, Any]:
    from faststream.nats import NatsBroker
    from faststream.specification import AsyncAPI

    broker = NatsBroker()
    for ep in entry_points(group="loom.asyncapi"):
        try:
            ep.load()(broker)
        except Exception:  # noqa: BLE001 - one plane's document never hides the others'
            log.warning("asyncapi: %s did not declare its subjects", ep.name)
    spec = AsyncAPI(broker, title="Loom events (NATS)", version="1.0.0", schema_version="3.0.0").to_specification()
    jsonable: dict[str, Any] = spec.to_jsonable()
    return jsonable


@router.get("/asyncapi.json", include_in_schema=False)
async def asyncapi_json() -> JSONResponse:
    return JSONResponse(document())
