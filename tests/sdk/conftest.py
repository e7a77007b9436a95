"""SDK fixtures: an `Agent` for the test's tenant, talking to the running stack over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from loom import Agent

from tests.conftest import Tenant

AGENT_LABEL = "sdk-test-bot"


@pytest.fixture
async def agent(tenant: Tenant) -> AsyncIterator[Agent]:
    async with Agent(
        org=tenant.org,
        namespace=tenant.namespace,
        agent=AGENT_LABEL,
        api_key=tenant.token,
        base_url=tenant.base_url,
    ) as a:
        yield a
