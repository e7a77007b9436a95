"""``Agent``: one caller of Loom (a token plus the labels its calls carry)."""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any

import httpx

from ._client import CLIENT_LABEL, Transport
from ._login import SessionAuth, stored_credential
from ._ops import DecisionsClient, Ops, PolicyClient
from .assistant import AssistantClient
from .tasks import TasksClient

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 60.0  # long polls wait up to 30 s server-side


class Agent:
    """A caller of Loom: an API key (token), an org and namespace, and the labels calls carry.

    Use it as an async context manager so its connections are closed::

        async with Agent(org="acme", namespace="private", agent="admin", api_key=TOKEN) as a:
            me = await a.ops.auth.whoami()
            await a.ops.namespace.create(name="research")
            await a.call("auth.whoami")  # any op by name

    Args:
        org: The org the token belongs to (sent as ``X-Loom-Org``; a token of another org is refused).
        namespace: The namespace calls act in (``X-Loom-Namespace``); an op's ``namespace``
            argument overrides it for one call.
        agent: This agent's label (``X-Loom-Agent``). Labels file ledger rows and key history
            policies; they never grant anything.
        api_key: The bearer token. Defaults to the ``LOOM_API_KEY`` environment variable, else
            the session ``loom login`` keeps for ``base_url`` (refreshed as it nears its end).
        base_url: The gateway. Defaults to ``LOOM_URL``, else ``http://127.0.0.1:8080``.
        user: Optional person label (``X-Loom-User``).
        session: Optional session label (``X-Loom-Session``).
        run_id: Optional run id (``X-Loom-Run-Id``) that groups this run's ledger rows.
        timeout: Seconds to wait for an answer (connect, read, write).
        transport: An ``httpx`` transport to use instead of the network (tests use
            ``httpx.MockTransport``).

    Attributes:
        ops: Every op of the catalog as ``ops.<group>.<op>(**args)``, generated.
        tasks: The task inbox ops under spec 003's names, and a worker's loop (``loom.tasks.TasksClient``).
        policy: The history-policy ops under spec 003's names (``loom.PolicyClient``, generated).
        assistant: Loom's assistant, streaming or whole (``loom.assistant.AssistantClient``).
        decision: The decision ops under spec 003's names (``loom.DecisionsClient``, generated).
    """

    ops: Ops
    tasks: TasksClient
    policy: PolicyClient
    assistant: AssistantClient
    decision: DecisionsClient

    def __init__(
        self,
        *,
        org: str,
        namespace: str,
        agent: str,
        api_key: str | None = None,
        base_url: str | None = None,
        user: str | None = None,
        session: str | None = None,
        run_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._org = org
        self._namespace = namespace
        self._agent_label = agent
        self._base_url = base_url or os.environ.get("LOOM_URL") or DEFAULT_BASE_URL
        key = api_key if api_key is not None else os.environ.get("LOOM_API_KEY")
        headers = {
            "X-Loom-Client": CLIENT_LABEL,
            "X-Loom-Org": org,
            "X-Loom-Namespace": namespace,
            "X-Loom-Agent": agent,
        }
        # No key: the `loom login` session for this URL, else none, so the server answers
        # AUTH_REQUIRED as it would to any caller.
        auth = None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif (credential := stored_credential(self._base_url)) is not None:
            auth = SessionAuth(self._base_url, credential)
        for name, value in (("X-Loom-User", user), ("X-Loom-Session", session), ("X-Loom-Run-Id", run_id)):
            if value:
                headers[name] = value
        self._transport = Transport(self._base_url, headers, timeout=timeout, transport=transport, auth=auth)
        self.ops = Ops(self)
        self.tasks = TasksClient(self)
        self.policy = PolicyClient(self)
        self.assistant = AssistantClient(self)
        self.decision = DecisionsClient(self)

    @classmethod
    def from_env(cls, agent: str, **overrides: Any) -> Agent:
        """An agent set up from the environment, as Loom's docs and examples run.

        Reads ``LOOM_ORG`` and ``LOOM_NAMESPACE`` (both required), ``LOOM_TOKEN`` (the token
        ``loom admin bootstrap`` prints; else the constructor's own default, ``LOOM_API_KEY`` or
        the ``loom login`` session) and ``LOOM_URL`` (else ``http://127.0.0.1:8080``)::

            async with Agent.from_env("docs") as agent:
                await agent.ops.auth.whoami()

        Args:
            agent: This agent's label (``X-Loom-Agent``).
            **overrides: Any other constructor argument (``api_key``, ``run_id``, ...); one given
                here wins over the environment.

        Raises:
            ValueError: ``LOOM_ORG`` or ``LOOM_NAMESPACE`` is unset and not given as an override.
        """
        settings: dict[str, Any] = {"api_key": os.environ.get("LOOM_TOKEN") or None}
        for name, variable in (("org", "LOOM_ORG"), ("namespace", "LOOM_NAMESPACE")):
            value = overrides.get(name) or os.environ.get(variable)
            if not value:
                raise ValueError(f"{variable} is not set: Agent.from_env needs the {name} to call in")
            settings[name] = value
        return cls(**{**settings, **overrides, "agent": agent})

    @property
    def org(self) -> str:
        """The org calls are made in."""
        return self._org

    @property
    def namespace(self) -> str:
        """The namespace calls act in unless an op's ``namespace`` argument names another."""
        return self._namespace

    @property
    def agent(self) -> str:
        """This agent's label."""
        return self._agent_label

    @property
    def base_url(self) -> str:
        """The gateway's URL."""
        return self._base_url

    async def call(self, op: str, /, **args: Any) -> dict[str, Any]:
        """Call any op by name and return its JSON answer.

        Arguments that are ``None`` are left out, so the op's default applies.

        Raises:
            LoomError: a subclass per refusal (``AuthError``, ``ForbiddenError``,
                ``NotFoundError``, ``ValidationError``, ...), ``UnavailableError`` on network failure.
        """
        return await self._transport._call(op, {k: v for k, v in args.items() if v is not None})

    async def aclose(self) -> None:
        """Close the agent's connections (``async with`` does this on exit)."""
        await self._transport.aclose()

    async def __aenter__(self) -> Agent:
        """Return the agent; its connections close when the block exits."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the agent's connections."""
        await self.aclose()

    def __repr__(self) -> str:
        # Never the key: reprs end up in logs.
        return f"Agent(org={self._org!r}, namespace={self._namespace!r}, agent={self._agent_label!r}, base_url={self._base_url!r})"
