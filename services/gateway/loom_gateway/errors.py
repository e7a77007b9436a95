"""A refusal as a Starlette response, for the gateway's routes that answer with one: rendered
by core's `http_error`, the one renderer every HTTP door uses (status, body, Retry-After)."""

from __future__ import annotations

from loom_core.errors import LoomError, http_error
from starlette.responses import Response


def error_response(err: LoomError) -> Response:
    status, headers, body = http_error(err)
    return Response(body, status_code=status, headers={k.decode("latin-1"): v.decode("latin-1") for k, v in headers})
