"""GET /asyncapi.json and /asyncapi: FastStream's AsyncAPI document of the NATS subjects Loom
publishes for subscribers, gathered from the planes through the `loom.asyncapi` entry point
(`name = "pkg.module:declare"`, a function that declares publishers on a FastStream NatsBroker)."""

from __future__ import annotations

import functools
import logging
from importlib.metadata import entry_points
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse

log = logging.getLogger(__name__)
router = APIRouter()


@functools.cache
def document() -> tuple[dict[str, Any], str]:
    from faststream.nats import NatsBroker
    from faststream.specification import AsyncAPI
    from faststream.specification.asyncapi.site import get_asyncapi_html

    broker = NatsBroker()
    for ep in entry_points(group="loom.asyncapi"):
        try:
            ep.load()(broker)
        except Exception:  # noqa: BLE001 - one plane's document never hides the others'
            log.warning("asyncapi: %s did not declare its subjects", ep.name)
    spec = AsyncAPI(broker, title="Loom events (NATS)", version="1.0.0", schema_version="3.0.0").to_specification()
    return spec.to_jsonable(), get_asyncapi_html(spec, try_it_out_path=None)


@router.get("/asyncapi.json", include_in_schema=False)
async def asyncapi_json() -> JSONResponse:
    return JSONResponse(document()[0])


@router.get("/asyncapi", include_in_schema=False)
async def asyncapi_page() -> HTMLResponse:
    return HTMLResponse(document()[1])
