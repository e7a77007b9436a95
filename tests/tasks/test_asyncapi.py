"""The AsyncAPI document of the task events: every subject and its payload schema, from the proto."""

from __future__ import annotations

import httpx
from loom_api.tasks.v1 import tasks_pb2 as pb
from loom_runner.embedded import Instance
from loom_tasks.asyncapi import KINDS


async def test_asyncapi_names_every_task_event_subject_with_the_proto_payload(tasks_a: Instance) -> None:
    async with httpx.AsyncClient(base_url=tasks_a.base_url) as c:
        doc = (await c.get("/asyncapi.json")).json()
        page = await c.get("/asyncapi")
    addresses = {ch["address"] for ch in doc["channels"].values()}
    assert {f"loom.tasks.{{org}}.{{namespace}}.{{inbox}}.{kind}" for kind in KINDS} <= addresses
    schema = doc["components"]["schemas"]["TaskEvent"]
    assert set(schema["properties"]) == {f.name for f in pb.TaskEvent.DESCRIPTOR.fields}
    assert schema["properties"]["version"]["type"] == "integer" and schema["properties"]["data"]["type"] == "object"
    # /asyncapi is the dashboard's page, rendered from /asyncapi.json by assets Loom serves: no CDN.
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"] and "https://" not in page.text
