"""What schemathesis found and the published schema now says: a schema-valid request is never
refused by the plane behind it. `remove: false` names no change (proto3's false is unset), so
inbox.policy_set without a mode is refused by the schema itself, naming the choice; a webhook URL
with whitespace or control characters is refused by its pattern."""

from __future__ import annotations

import pytest
from loom_runner.embedded import Instance

from tests.conftest import Tenant, call


async def test_policy_set_with_remove_false_and_no_mode_is_refused_by_the_schema(tenant: Tenant, stack: Instance) -> None:
    schema = stack.runtime.catalog.ops["inbox.policy_set"].input_schema
    assert {"required": ["remove"], "properties": {"remove": {"const": True}}} in schema["allOf"][0]["anyOf"]
    async with tenant.client() as c:
        await call(c, "inbox.register", inbox="pol-box")
        r = await call(c, "inbox.policy_set", inbox="pol-box", poster="user:bob", remove=False)
        removed = await call(c, "inbox.policy_set", inbox="pol-box", poster="user:bob", remove=True)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["detail"]["field"] == "mode" and r.json()["error"]["detail"]["reason"] == "required"
    assert removed.status_code == 200, removed.text


@pytest.mark.parametrize("url", ["http://x\n/y", "http://x\x01y/", "http://exa mple.com/", "not a url"])
async def test_a_webhook_url_with_control_characters_breaks_the_published_pattern(tenant: Tenant, stack: Instance, url: str) -> None:
    import re

    pattern = stack.runtime.catalog.ops["inbox.register"].input_schema["properties"]["webhook_url"]["pattern"]
    assert re.search(pattern, url) is None
    async with tenant.client() as c:
        r = await call(c, "inbox.register", inbox="hook-box", webhook_url=url)
    assert r.status_code == 422 and r.json()["error"]["detail"]["field"] == "webhook_url", r.text
    assert r.json()["error"]["detail"]["reason"] == "malformed"
