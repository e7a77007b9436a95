"""Inbox webhooks: the secret-name rule, the SSRF guard, signing, retries, the delivery log, and
the shared JetStream consumer, against a real nats-server, chDB and HTTP(S) receivers on
loopback (reached only through the test-only allowance, which is off by default)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import ssl
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

try:
    import loom_tasks.webhooks  # noqa: F401
except ImportError:  # the tasks package not installed yet: import it from the tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "services" / "tasks"))

from loom_core.bus import NatsServer
from loom_core.errors import ValidationFailed
from loom_core.runtime import Runtime
from loom_core.store import run_migrations
from loom_tasks import webhooks
from loom_tasks.settings import TasksSettings
from loom_tasks.webhooks import (
    SIGNATURE_HEADER,
    WebhookDeliverer,
    check_host,
    encode_org,
    list_deliveries,
    refusal,
    sign,
    validate_webhook_config,
    verify_signature,
    webhook_secret_env_name,
)
from loom_tasks.webhooks._guard import AddressRefused

from tests.conftest import make_settings

# --- the secret name and the URL (pure)


def test_secret_name_encodes_the_org_as_the_spec_says() -> None:
    assert encode_org("acme-corp") == "ACME_2DCORP"
    assert encode_org("acme_corp") == "ACME_5FCORP"
    assert encode_org("acme") == "ACME"
    assert encode_org("team42") == "TEAM42"
    assert encode_org("Acme") == "_41CME"  # an upper-case letter is escaped, so it never meets "acme"
    assert encode_org("é") == "_C3_A9"  # every other byte
    assert webhook_secret_env_name("acme-corp", "ALERTS") == "LOOM_WEBHOOK_SECRET_ACME_2DCORP__ALERTS"
    assert webhook_secret_env_name("acme_corp", "Hook1") == "LOOM_WEBHOOK_SECRET_ACME_5FCORP__Hook1"
    with pytest.raises(ValueError):
        webhook_secret_env_name("acme", "NOT_ALLOWED")


def test_no_two_org_ids_share_an_org_part() -> None:
    orgs = ["acme-corp", "acme_corp", "acmecorp", "acme-2dcorp", "acme_2Dcorp", "Acme-corp", "acme--corp", "a", "a_41", "A"]
    parts = [encode_org(o) for o in orgs]
    assert len(set(parts)) == len(orgs)


def test_register_accepts_the_orgs_own_secret_name_and_an_empty_webhook() -> None:
    validate_webhook_config("acme-corp", "https://hooks.example.com/loom?x=1", "LOOM_WEBHOOK_SECRET_ACME_2DCORP__ALERTS")
    validate_webhook_config("acme-corp", "http://hooks.example.com:8080/", "LOOM_WEBHOOK_SECRET_ACME_2DCORP__a1")
    validate_webhook_config("acme-corp", "", "")


@pytest.mark.parametrize(
    "secret_ref",
    [
        "LOOM_WEBHOOK_SECRET_ACME_5FCORP__ALERTS",  # acme_corp's, not acme-corp's
        "LOOM_WEBHOOK_SECRET_ACME__ALERTS",  # org "acme"
        "LOOM_WEBHOOK_SECRET_ACMECORP__ALERTS",
        "LOOM_WEBHOOK_SECRET_ACME_2DCORP__",  # no NAME
        "LOOM_WEBHOOK_SECRET_ACME_2DCORP__AL_ERTS",  # NAME with another byte
        "LOOM_WEBHOOK_SECRET_ACME_2DCORP__ALERTS ",
        "loom_webhook_secret_ACME_2DCORP__ALERTS",
        "LOOM_JWT_SECRET",
        "HOME",
    ],
)
def test_register_refuses_any_other_secret_name_with_422(secret_ref: str) -> None:
    with pytest.raises(ValidationFailed) as err:
        validate_webhook_config("acme-corp", "https://hooks.example.com/", secret_ref)
    assert err.value.http_status == 422
    assert err.value.detail and err.value.detail["field"] == "webhook_secret_ref"


@pytest.mark.parametrize(
    "url",
    ["ftp://hooks.example.com/", "file:///etc/passwd", "http://", "https:///path", "hooks.example.com/x", "gopher://x/",
     "https://user:pw@hooks.example.com/", "https://hooks.example.com:99999/", "https://hooks.example.com/a b"],
)  # fmt: skip
def test_register_refuses_a_url_that_is_not_http_or_https_with_a_host(url: str) -> None:
    with pytest.raises(ValidationFailed) as err:
        validate_webhook_config("acme", url, "LOOM_WEBHOOK_SECRET_ACME__HOOK")
    assert err.value.detail and err.value.detail["field"] == "webhook_url"


def test_register_refuses_a_url_without_a_secret_ref() -> None:
    with pytest.raises(ValidationFailed) as err:
        validate_webhook_config("acme", "https://hooks.example.com/", "")
    assert err.value.detail and err.value.detail["field"] == "webhook_secret_ref"


# --- the SSRF guard (pure)


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"), ("127.9.9.9", "loopback"), ("::1", "loopback"),
        ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("fd00::1", "private"),
        ("169.254.169.254", "link_local"), ("fe80::1", "link_local"), ("fe80::1%eth0", "link_local"),
        ("224.0.0.1", "multicast"), ("ff02::1", "multicast"), ("0.0.0.0", "unspecified"), ("::", "unspecified"),
        ("240.0.0.1", None), ("100.64.0.1", "not_global"),
        ("::ffff:127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "link_local"), ("::ffff:10.0.0.1", "private"),
        ("::127.0.0.1", "loopback"), ("64:ff9b::a9fe:a9fe", "link_local"), ("2002:7f00:1::", "loopback"),
    ],
)  # fmt: skip
def test_guard_refuses_internal_addresses_and_their_ipv6_forms(address: str, reason: str | None) -> None:
    why = refusal(address)
    assert why is not None
    if reason is not None:
        assert why == reason


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700:4700::1111", "::ffff:93.184.216.34", "64:ff9b::5db8:d822"])
def test_guard_lets_public_addresses_through(address: str) -> None:
    assert refusal(address) is None


def test_loopback_allowance_covers_plain_loopback_only() -> None:
    assert refusal("127.0.0.1", allow_loopback=True) is None
    assert refusal("::1", allow_loopback=True) is None
    for other in ("::ffff:127.0.0.1", "10.0.0.1", "169.254.169.254", "0.0.0.0", "192.168.0.1"):
        assert refusal(other, allow_loopback=True) is not None


async def test_guard_refuses_a_name_when_any_address_it_resolves_to_is_bad() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1", "169.254.169.254"]

    with pytest.raises(AddressRefused) as err:
        await check_host("hooks.example.test", 443, resolver=resolver, allow_loopback=True)
    assert err.value.reason == "link_local"


@pytest.mark.parametrize("host", ["localhost", "127.1", "2130706433", "0x7f000001", "0", "[::1]", "[::ffff:127.0.0.1]", "169.254.169.254"])
async def test_guard_refuses_loopback_and_metadata_hosts_however_they_are_spelled(host: str) -> None:
    """The system resolver turns every spelling into the address that is checked."""
    with pytest.raises(AddressRefused):
        await check_host(host.strip("[]"), 80)


def test_signature_verifies_and_refuses_tampering_and_replays() -> None:
    body = b'{"inbox":"x","count":1}'
    header = sign("s3cret", body, timestamp=1_700_000_000)
    assert header.startswith("t=1700000000,v1=")
    assert verify_signature("s3cret", header, body, now=1_700_000_010)
    assert not verify_signature("s3cret", header, body + b" ", now=1_700_000_010)
    assert not verify_signature("other", header, body, now=1_700_000_010)
    assert not verify_signature("s3cret", header, body, now=1_700_000_000 + 3600)
    assert not verify_signature("s3cret", "v1=abc", body)


# --- a receiver on loopback


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    sni: str | None


@dataclass
class Receiver:
    """A tiny HTTP(S) server: records requests, answers from `statuses` (then 200)."""

    statuses: list[int] = field(default_factory=list)
    extra_headers: dict[str, str] = field(default_factory=dict)
    hold: asyncio.Event | None = None  # when set, a request waits for it before answering
    requests: list[Received] = field(default_factory=list)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    port: int = 0
    server: asyncio.Server | None = None
    _sni: dict[int, str | None] = field(default_factory=dict)

    async def start(self, ssl_ctx: ssl.SSLContext | None = None) -> Receiver:
        if ssl_ctx is not None:
            last_sni: list[str | None] = [None]

            def on_sni(sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
                last_sni[0] = name

            ssl_ctx.sni_callback = on_sni  # type: ignore[assignment]
            self._last_sni = last_sni
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=ssl_ctx)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            sni = getattr(self, "_last_sni", [None])[0]
            async with self.arrived:
                self.requests.append(Received(method, path, headers, body, sni))
                self.arrived.notify_all()
            if self.hold is not None:
                await self.hold.wait()
            status = self.statuses.pop(0) if self.statuses else 200
            extra = "".join(f"{k}: {v}\r\n" for k, v in self.extra_headers.items())
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n{extra}\r\n".encode())
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def wait_for(self, n: int, timeout: float = 10.0) -> list[Received]:  # noqa: ASYNC109 - a polling helper
        async def enough() -> None:
            async with self.arrived:
                await self.arrived.wait_for(lambda: len(self.requests) >= n)

        await asyncio.wait_for(enough(), timeout)
        return self.requests

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook?token=receiver-secret"


class Lookup:
    def __init__(self) -> None:
        self.hooks: dict[tuple[str, str], tuple[str, str]] = {}
        self.full_reads = 0  # webhook_inboxes calls: every org's inboxes read

    async def webhook_for(self, org: str, inbox: str) -> tuple[str, str] | None:
        return self.hooks.get((org, inbox))

    async def webhook_inboxes(self) -> list[tuple[str, str]]:
        self.full_reads += 1
        return list(self.hooks)

    async def has_webhook(self, org: str, inbox: str) -> bool:
        return (org, inbox) in self.hooks


# --- fixtures: a nats-server of our own, a runtime on it, the events stream


@pytest.fixture(scope="module")
async def wh_nats(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[NatsServer]:
    async with NatsServer(tmp_path_factory.mktemp("webhooks-nats")) as srv:
        yield srv


@pytest.fixture(scope="module")
async def rt(data_dir: Path, store: Any, wh_nats: NatsServer) -> AsyncIterator[Runtime]:
    runtime = await Runtime.start(
        make_settings(data_dir, nats_graceful_stop_seconds=0.5), store=store, nats_url=wh_nats.url, name="loom-webhooks-test"
    )
    await run_migrations(store, webhooks.MIGRATIONS)
    from nats.js.api import StreamConfig

    await runtime.bus.ensure_stream(StreamConfig(name=webhooks.STREAM, subjects=["loom.tasks.>"]))
    yield runtime
    await runtime.stop()


@dataclass
class Hook:
    org: str
    namespace: str
    inbox: str
    secret_ref: str
    secret: str


@pytest.fixture
def h(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hook]:
    name = f"org-{uuid.uuid4().hex[:8]}"
    ref = webhook_secret_env_name(name, "HOOK")
    secret = uuid.uuid4().hex
    monkeypatch.setenv(ref, secret)
    yield Hook(name, "private", "private-bot", ref, secret)


async def publish(rt: Runtime, o: Hook, seq: int, inbox: str | None = None, kind: str = "created") -> None:
    inbox = inbox or o.inbox
    payload = {"seq": seq, "event_id": uuid.uuid4().hex, "org": o.org, "namespace": o.namespace, "inbox": inbox, "task_id": "t-1",
               "kind": kind, "poster": "sa:public-bot", "status": "todo", "at": "2026-01-01T00:00:00Z", "brief": {"secret": "task content"}}  # fmt: skip
    await rt.bus.js.publish(f"loom.tasks.{o.org}.{o.namespace}.{inbox}.{kind}", json.dumps(payload).encode())


@contextlib.asynccontextmanager
async def running(d: WebhookDeliverer) -> AsyncIterator[WebhookDeliverer]:
    await d.start()
    try:
        await asyncio.wait_for(d.ready.wait(), 10)
        yield d
    finally:
        await d.stop()


def deliverer(rt: Runtime, lookup: Lookup, **kw: Any) -> WebhookDeliverer:
    kw.setdefault("durable", f"wh-{uuid.uuid4().hex[:8]}")
    kw.setdefault("retry_base_seconds", 0.05)
    kw.setdefault("timeout_seconds", 2.0)
    kw.setdefault("settings", rt.settings.plane(TasksSettings))
    return WebhookDeliverer(rt.bus, rt.store, lookup, **kw)


async def log_rows(rt: Runtime, o: Hook, n: int, timeout: float = 10.0, inbox: str | None = None) -> list[webhooks.Attempt]:  # noqa: ASYNC109 - a polling helper
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        rows = await list_deliveries(rt.store, o.org, inbox or o.inbox)
        if len(rows) >= n or asyncio.get_running_loop().time() > deadline:
            return rows
        await asyncio.sleep(0.05)


# --- delivery


async def test_loopback_url_is_refused_and_nothing_sent_without_the_test_allowance(rt: Runtime, h: Hook) -> None:
    recv = await Receiver().start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    d = deliverer(rt, lookup)  # the allowance is off by default
    assert d.allow_loopback_for_tests is False
    async with running(d):
        await publish(rt, h, 1)
        rows = await log_rows(rt, h, 1)
        # The same through a name: localhost resolves to loopback at delivery and is refused.
        lookup.hooks[(h.org, h.inbox)] = (f"http://localhost:{recv.port}/hook", h.secret_ref)
        await publish(rt, h, 2)
        rows = await log_rows(rt, h, 2)
    await asyncio.sleep(0.2)
    await recv.stop()
    assert recv.requests == []
    assert [r.outcome for r in rows] == ["refused", "refused"]
    assert all(r.error == "address_refused:loopback" for r in rows)
    assert "receiver-secret" not in json.dumps([asdict(r) for r in rows])  # the query string is not logged


async def test_notice_is_signed_and_carries_no_task_content(rt: Runtime, h: Hook) -> None:
    recv = await Receiver().start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True)):
        await publish(rt, h, 41)
        (req,) = await recv.wait_for(1)
        rows = await log_rows(rt, h, 1)
    await recv.stop()
    assert req.method == "POST" and req.path == "/hook?token=receiver-secret"
    assert req.headers["content-type"] == "application/json"
    assert verify_signature(h.secret, req.headers[SIGNATURE_HEADER.lower()], req.body)
    notice = json.loads(req.body)
    assert set(notice) == {"event", "delivery_id", "org", "namespace", "inbox", "newest_seq", "count", "sent_at"}
    assert (notice["org"], notice["namespace"], notice["inbox"], notice["newest_seq"], notice["count"]) == (
        h.org,
        "private",
        h.inbox,
        41,
        1,
    )
    assert b"task content" not in req.body
    assert rows[0].outcome == "delivered" and rows[0].status_code == 200 and rows[0].address == "127.0.0.1"


async def test_events_arriving_during_a_delivery_become_one_more_notice(rt: Runtime, h: Hook) -> None:
    hold = asyncio.Event()
    recv = await Receiver(hold=hold).start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True)):
        await publish(rt, h, 1)
        await recv.wait_for(1)  # the first notice is held open by the receiver
        for seq in range(2, 7):
            await publish(rt, h, seq)
        await asyncio.sleep(1.5)  # every one of them fetched and merged meanwhile
        hold.set()
        reqs = await recv.wait_for(2)
        await asyncio.sleep(0.5)
    await recv.stop()
    notices = [json.loads(r.body) for r in recv.requests]
    assert [(n["count"], n["newest_seq"]) for n in notices] == [(1, 1), (5, 6)]
    assert len(reqs) == 2


async def test_failing_receiver_is_retried_with_backoff_then_given_up(rt: Runtime, h: Hook) -> None:
    recv = await Receiver(statuses=[500, 503, 500, 500]).start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True, max_attempts=3)):
        await publish(rt, h, 7)
        rows = await log_rows(rt, h, 3)
        await asyncio.sleep(0.3)
    await recv.stop()
    assert len(recv.requests) == 3
    assert sorted((r.attempt, r.outcome, r.status_code) for r in rows) == [
        (1, "retrying", 500),
        (2, "retrying", 503),
        (3, "gave_up", 500),
    ]
    assert len({r.delivery_id for r in rows}) == 1
    # One delivery: the same body each time, each attempt freshly signed.
    assert len({r.body for r in recv.requests}) == 1


async def test_receiver_that_recovers_gets_the_notice_on_a_retry(rt: Runtime, h: Hook) -> None:
    recv = await Receiver(statuses=[502]).start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True)):
        await publish(rt, h, 3)
        rows = await log_rows(rt, h, 2)
    await recv.stop()
    assert sorted((r.attempt, r.outcome) for r in rows) == [(1, "retrying"), (2, "delivered")]


async def test_a_4xx_is_not_retried(rt: Runtime, h: Hook) -> None:
    recv = await Receiver(statuses=[404]).start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True)):
        await publish(rt, h, 3)
        rows = await log_rows(rt, h, 1)
        await asyncio.sleep(0.3)
    await recv.stop()
    assert len(recv.requests) == 1
    assert [(r.outcome, r.error) for r in rows] == [("gave_up", "http_404")]


async def test_a_redirect_is_not_followed(rt: Runtime, h: Hook) -> None:
    elsewhere = await Receiver().start()
    recv = await Receiver(statuses=[307], extra_headers={"Location": f"http://127.0.0.1:{elsewhere.port}/stolen"}).start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True)):
        await publish(rt, h, 5)
        rows = await log_rows(rt, h, 1)
        await asyncio.sleep(0.3)
    await recv.stop()
    await elsewhere.stop()
    assert len(recv.requests) == 1 and elsewhere.requests == []
    assert [(r.outcome, r.status_code, r.error) for r in rows] == [("gave_up", 307, "redirect_not_followed")]


async def test_a_stored_secret_ref_of_another_org_is_never_read(rt: Runtime, h: Hook, monkeypatch: pytest.MonkeyPatch) -> None:
    victim = f"victim-{uuid.uuid4().hex[:6]}"
    victim_ref = webhook_secret_env_name(victim, "HOOK")
    monkeypatch.setenv(victim_ref, "the victim's secret")

    class Recording(dict[str, str]):
        reads: list[str] = []

        def get(self, key: str, default: Any = None) -> Any:
            self.reads.append(key)
            return super().get(key, default)

        def __getitem__(self, key: str) -> str:
            self.reads.append(key)
            return super().__getitem__(key)

    env = Recording(os.environ)
    monkeypatch.setattr(os, "environ", env)
    recv = await Receiver().start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, victim_ref)  # a row written around inbox.register's check
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True)):
        await publish(rt, h, 9)
        rows = await log_rows(rt, h, 1)
        await asyncio.sleep(0.2)
    await recv.stop()
    assert recv.requests == []
    assert [(r.outcome, r.error) for r in rows] == [("refused", "secret_ref_not_of_this_org")]
    assert victim_ref not in env.reads


async def test_missing_secret_means_no_unsigned_notice(rt: Runtime, h: Hook, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(h.secret_ref)
    recv = await Receiver().start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True)):
        await publish(rt, h, 1)
        rows = await log_rows(rt, h, 1)
    await recv.stop()
    assert recv.requests == []
    assert [(r.outcome, r.error) for r in rows] == [("refused", "secret_not_set")]


async def test_host_is_resolved_at_each_delivery(rt: Runtime, h: Hook) -> None:
    """DNS rebinding: the name that passed once is checked again, and refused when it turns."""
    recv = await Receiver().start()
    answers = [["127.0.0.1"], ["169.254.169.254"]]
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers[min(len(asked), len(answers)) - 1]

    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (f"http://hooks.example.test:{recv.port}/hook", h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True, resolver=resolver)):
        await publish(rt, h, 1)
        await recv.wait_for(1)
        await log_rows(rt, h, 1)
        await publish(rt, h, 2)
        rows = await log_rows(rt, h, 2)
    await recv.stop()
    assert asked == ["hooks.example.test", "hooks.example.test"]
    assert len(recv.requests) == 1
    assert recv.requests[0].headers["host"] == f"hooks.example.test:{recv.port}"  # the name stays the Host
    assert sorted((r.outcome, r.error) for r in rows) == [("delivered", ""), ("refused", "address_refused:link_local")]


def _self_signed(tmp: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_pem, key_pem = tmp / "cert.pem", tmp / "key.pem"
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_pem, key_pem)
    client = ssl.create_default_context(cafile=str(cert_pem))
    return server, client


async def test_https_connects_to_the_checked_address_with_the_name_as_host_and_sni(rt: Runtime, h: Hook, tmp_path: Path) -> None:
    server_ctx, client_ctx = _self_signed(tmp_path, "hooks.example.test")
    recv = await Receiver().start(server_ctx)

    async def resolver(host: str, port: int) -> list[str]:
        assert host == "hooks.example.test"
        return ["127.0.0.1"]

    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (f"https://hooks.example.test:{recv.port}/hook", h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True, resolver=resolver, verify=client_ctx)):
        await publish(rt, h, 1)
        (req,) = await recv.wait_for(1)
        rows = await log_rows(rt, h, 1)
    await recv.stop()
    assert req.sni == "hooks.example.test"
    assert req.headers["host"] == f"hooks.example.test:{recv.port}"
    assert rows[0].outcome == "delivered" and rows[0].address == "127.0.0.1"


async def test_certificate_for_another_name_is_refused(rt: Runtime, h: Hook, tmp_path: Path) -> None:
    server_ctx, client_ctx = _self_signed(tmp_path, "other.example.test")
    recv = await Receiver().start(server_ctx)

    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (f"https://hooks.example.test:{recv.port}/hook", h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True, resolver=resolver, verify=client_ctx, max_attempts=1)):
        await publish(rt, h, 1)
        rows = await log_rows(rt, h, 1)
    await recv.stop()
    assert recv.requests == []
    assert [(r.outcome, r.error) for r in rows] == [("gave_up", "tls_error")]


async def test_inbox_without_a_webhook_sends_nothing(rt: Runtime, h: Hook) -> None:
    recv = await Receiver().start()
    lookup = Lookup()  # no row for this inbox
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True)):
        await publish(rt, h, 1)
        await asyncio.sleep(0.5)
    await recv.stop()
    assert recv.requests == []
    assert await list_deliveries(rt.store, h.org, h.inbox) == []


async def test_replicas_share_one_consumer_so_each_event_is_counted_once(
    rt: Runtime, data_dir: Path, store: Any, wh_nats: NatsServer, h: Hook
) -> None:
    other = await Runtime.start(make_settings(data_dir), store=store, nats_url=wh_nats.url, name="loom-webhooks-test-b")
    recv = await Receiver().start()
    lookup = Lookup()
    inboxes = [f"bot-{i}" for i in range(4)]
    for inbox in inboxes:
        lookup.hooks[(h.org, inbox)] = (recv.url, h.secret_ref)
    durable = f"wh-shared-{uuid.uuid4().hex[:6]}"
    try:
        async with (
            running(deliverer(rt, lookup, allow_loopback_for_tests=True, durable=durable)),
            running(deliverer(other, lookup, allow_loopback_for_tests=True, durable=durable)),
        ):
            seq = 0
            for _round in range(5):
                for inbox in inboxes:
                    for _ in range(2):
                        seq += 1
                        await publish(rt, h, seq, inbox=inbox)
                await asyncio.sleep(0.05)

            async def all_counted() -> None:
                async with recv.arrived:
                    await recv.arrived.wait_for(lambda: sum(json.loads(r.body)["count"] for r in recv.requests) >= seq)

            await asyncio.wait_for(all_counted(), 15)
            await asyncio.sleep(0.5)  # and nothing more arrives
    finally:
        await recv.stop()
        await other.stop()
    per_inbox: dict[str, int] = {}
    for r in recv.requests:
        n = json.loads(r.body)
        per_inbox[n["inbox"]] = per_inbox.get(n["inbox"], 0) + n["count"]
    assert per_inbox == {inbox: 10 for inbox in inboxes}


async def test_delivery_log_lists_newest_first_and_is_per_inbox(rt: Runtime, h: Hook) -> None:
    recv = await Receiver(statuses=[500]).start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    lookup.hooks[(h.org, "other-bot")] = (recv.url, h.secret_ref)
    async with running(deliverer(rt, lookup, allow_loopback_for_tests=True)):
        await publish(rt, h, 1)
        await log_rows(rt, h, 2)
        await publish(rt, h, 2, inbox="other-bot")
        await log_rows(rt, h, 1, inbox="other-bot")
    await recv.stop()
    rows = await list_deliveries(rt.store, h.org, h.inbox)
    assert [(r.attempt, r.outcome) for r in rows] == [(2, "delivered"), (1, "retrying")]
    assert rows[0].attempted_at >= rows[1].attempted_at
    assert len(await list_deliveries(rt.store, h.org, h.inbox, limit=1)) == 1
    assert [r.inbox for r in await list_deliveries(rt.store, h.org, "other-bot")] == ["other-bot"]


# --- the consumer's filter: only inboxes with a webhook reach the deliverer


def test_the_filter_names_each_webhook_inbox_then_each_org_then_the_whole_stream() -> None:
    from loom_tasks.webhooks._deliverer import MAX_FILTERS, NO_WEBHOOKS, filter_subjects

    assert filter_subjects([]) == [NO_WEBHOOKS]
    assert filter_subjects([("o2", "b"), ("o1", "a"), ("o1", "a")]) == ["loom.tasks.o1.*.a.*", "loom.tasks.o2.*.b.*"]
    assert filter_subjects([("o1", f"bot-{n}") for n in range(MAX_FILTERS + 1)]) == ["loom.tasks.o1.>"]
    assert filter_subjects([(f"o{n}", "bot") for n in range(MAX_FILTERS + 1)]) == ["loom.tasks.>"]
    # A name that is not a plain subject token cannot be filtered on: the whole stream then.
    assert filter_subjects([("o1", "a.b")]) == filter_subjects([("o1", "a*")]) == ["loom.tasks.>"]


async def test_events_of_an_inbox_without_a_webhook_never_reach_the_deliverer(rt: Runtime, h: Hook) -> None:
    recv = await Receiver().start()
    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = (recv.url, h.secret_ref)
    d = deliverer(rt, lookup, allow_loopback_for_tests=True)
    try:
        async with running(d):
            assert d.filter == [f"loom.tasks.{h.org}.*.{h.inbox}.*"]
            for seq in range(1, 4):
                await publish(rt, h, seq, inbox="no-hook-bot")
            await publish(rt, h, 4)
            await log_rows(rt, h, 1)
            info = await rt.bus.js.consumer_info(webhooks.STREAM, d.durable)
            # The server handed the deliverer the one event of the inbox with a webhook, nothing else.
            assert (info.delivered.consumer_seq, info.num_pending) == (1, 0)

            # A webhook set later: once the refresh returns, the inbox's events are delivered.
            lookup.hooks[(h.org, "late-bot")] = (recv.url, h.secret_ref)
            assert f"loom.tasks.{h.org}.*.late-bot.*" in await d.refresh_filter()
            await publish(rt, h, 5, inbox="late-bot")
            assert len(await log_rows(rt, h, 1, inbox="late-bot")) == 1

            # And removed: the inbox's events are filtered out again.
            del lookup.hooks[(h.org, "late-bot")]
            await d.refresh_filter()
            await publish(rt, h, 6, inbox="late-bot")
            await publish(rt, h, 7)
            await log_rows(rt, h, 2)
            info = await rt.bus.js.consumer_info(webhooks.STREAM, d.durable)
            assert (info.delivered.consumer_seq, info.num_pending) == (3, 0)
    finally:
        await recv.stop()
    assert {json.loads(r.body)["inbox"] for r in recv.requests} == {h.inbox, "late-bot"}


async def test_an_inbox_change_here_is_awaited_and_one_on_another_replica_reaches_the_listeners() -> None:
    from loom_tasks.directory import Directory

    heard: list[tuple[str, str] | None] = []
    directory = Directory(inboxes=None, bus=None, ttl=60.0)  # type: ignore[arg-type]  # no store read here

    async def listener(changed: tuple[str, str] | None) -> None:
        await asyncio.sleep(0)
        heard.append(changed)

    async def broken(changed: tuple[str, str] | None) -> None:
        raise RuntimeError("a listener's failure is not the change's")

    directory.on_change(broken)
    directory.on_change(listener)
    await directory.changed("org-a", "bot")
    assert heard == [("org-a", "bot")]  # before changed() returned
    directory.dropped(json.dumps({"org": "org-a", "inbox": "bot"}).encode())  # another replica's notice
    directory.dropped(b"not json")  # unreadable: the listeners hear of a change they cannot name
    for _ in range(10):
        await asyncio.sleep(0)
    assert heard == [("org-a", "bot"), ("org-a", "bot"), None]


async def test_a_change_that_gives_or_takes_no_webhook_leaves_the_filter_unread(rt: Runtime, h: Hook) -> None:
    """`inbox_changed` refreshes the filter (every org's inboxes read, a consumer lookup) only
    when the inbox's webhook appeared or went against the set the filter was built from."""
    from loom_tasks.webhooks._deliverer import filter_subjects

    lookup = Lookup()
    lookup.hooks[(h.org, h.inbox)] = ("https://hooks.example.test/", h.secret_ref)
    d = deliverer(rt, lookup)
    async with running(d):
        reads = lookup.full_reads
        await d.inbox_changed((h.org, h.inbox))  # its policy or URL changed: still a webhook
        await d.inbox_changed((h.org, "plain-bot"))  # an inbox without one, registered or changed
        assert lookup.full_reads == reads
        assert d.filter == [f"loom.tasks.{h.org}.*.{h.inbox}.*"]

        lookup.hooks[(h.org, "plain-bot")] = ("https://hooks.example.test/", h.secret_ref)
        await d.inbox_changed((h.org, "plain-bot"))  # it gained one
        assert lookup.full_reads > reads
        assert d.filter == filter_subjects(lookup.hooks)
        reads = lookup.full_reads
        del lookup.hooks[(h.org, h.inbox)]
        await d.inbox_changed((h.org, h.inbox))  # and this one lost its own
        assert lookup.full_reads > reads
        assert d.filter == [f"loom.tasks.{h.org}.*.plain-bot.*"]
        reads = lookup.full_reads
        await d.inbox_changed(None)  # a change nobody could name: read all
        assert lookup.full_reads > reads
        info = await rt.bus.js.consumer_info(webhooks.STREAM, d.durable)
        assert sorted(info.config.filter_subjects or []) == d.filter


async def test_replicas_refreshing_at_once_leave_the_filter_as_the_store_is(
    rt: Runtime, data_dir: Path, store: Any, wh_nats: NatsServer, h: Hook
) -> None:
    """Each replica reads the store, sets the filter, and reads again: a replica whose read went
    stale while another set a newer filter writes the old set, then its next read corrects it."""
    import random

    from loom_tasks.webhooks._deliverer import filter_subjects

    class SlowStore(Lookup):
        async def webhook_inboxes(self) -> list[tuple[str, str]]:
            snapshot = list(self.hooks)
            await asyncio.sleep(random.uniform(0, 0.01))  # the store changes meanwhile
            return snapshot

    other = await Runtime.start(make_settings(data_dir), store=store, nats_url=wh_nats.url, name="loom-webhooks-test-c")
    lookup = SlowStore()
    durable = f"wh-race-{uuid.uuid4().hex[:6]}"
    a, b = deliverer(rt, lookup, durable=durable), deliverer(other, lookup, durable=durable)
    try:
        async with running(a), running(b):

            async def change(i: int) -> None:
                await asyncio.sleep(random.uniform(0, 0.02))
                if i % 3 == 2:
                    lookup.hooks.pop((h.org, f"bot-{i - 1}"), None)
                else:
                    lookup.hooks[(h.org, f"bot-{i}")] = ("https://hooks.example.test/", h.secret_ref)
                await (a if i % 2 else b).refresh_filter()  # the replica that took the op
                await (b if i % 2 else a).refresh_filter()  # the other one, on the change notice

            await asyncio.gather(*(change(i) for i in range(30)))
            info = await rt.bus.js.consumer_info(webhooks.STREAM, durable)
            assert sorted(info.config.filter_subjects or []) == filter_subjects(lookup.hooks)
    finally:
        await other.stop()


# --- through the plane: inbox.register, task.create, inbox.deliveries over REST


@pytest.fixture(scope="module")
async def hooked(data_dir: Path, store: Any, wh_nats: NatsServer) -> AsyncIterator[Any]:
    """A Loom replica on this module's own nats-server (so its deliverer is the only one that
    sees these events), with the loopback allowance on (the deliverer's test seam: no setting
    reaches it). It shares chDB with the other test replicas, so its lease sweep stays off."""
    from loom_runner.embedded import start_instance

    settings = make_settings(
        data_dir,
        task_webhook_retry_base_seconds=0.05,
        task_lease_sweep_enabled=False,
        task_config_cache_ttl_seconds=0.5,
        nats_graceful_stop_seconds=0.5,  # a delivery still running at the module's end is cut off, not waited 5 s for
    )
    inst = await start_instance(settings, store=store, nats_url=wh_nats.url, name="loom-webhooks-e2e", only_planes={"identity", "tasks"})
    deliverer = next(p for p in inst.planes if p.name == "tasks").deliverer
    deliverer.allow_loopback_for_tests = deliverer.sender.allow_loopback = True
    yield inst
    await inst.stop()


async def test_registered_webhook_gets_a_signed_notice_for_a_created_task(hooked: Any, h: Hook) -> None:
    import httpx
    from loom_gateway.identity import bootstrap_org

    token, _ = await bootstrap_org(hooked.runtime.identity, hooked.runtime.codec, h.org, h.namespace + "-ns", 3600)
    ns = h.namespace + "-ns"
    recv = await Receiver().start()
    headers = {"Authorization": f"Bearer {token}", "X-Loom-Namespace": ns, "X-Loom-Agent": "admin"}
    async with httpx.AsyncClient(base_url=hooked.base_url, headers=headers, timeout=30) as c:
        # Another org's variable is refused at the door, naming the field.
        other_ref = webhook_secret_env_name(h.org + "x", "HOOK")
        r = await c.post("/v1/inbox.register", json={"inbox": h.inbox, "webhook_url": recv.url, "webhook_secret_ref": other_ref})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["detail"]["field"] == "webhook_secret_ref"
        r = await c.post("/v1/inbox.register", json={"inbox": h.inbox, "webhook_url": recv.url, "webhook_secret_ref": h.secret_ref})
        assert r.status_code == 200, r.text
        # The op answered after the webhook consumer's filter took the inbox in.
        deliverer = next(p for p in hooked.planes if p.name == "tasks").deliverer
        assert f"loom.tasks.{h.org}.*.{h.inbox}.*" in deliverer.filter
        r = await c.post(
            "/v1/task.create", json={"inbox": h.inbox, "kind": "chore", "title": "secret title", "brief": {"objective": "private words"}}
        )
        assert r.status_code == 200, r.text
        (req,) = await recv.wait_for(1, timeout=15)
        notice = json.loads(req.body)
        assert verify_signature(h.secret, req.headers[SIGNATURE_HEADER.lower()], req.body)
        assert (notice["org"], notice["namespace"], notice["inbox"], notice["count"]) == (h.org, ns, h.inbox, 1)
        assert b"secret title" not in req.body and b"private words" not in req.body

        async def logged() -> list[dict[str, Any]]:
            for _ in range(100):
                r = await c.post("/v1/inbox.deliveries", json={"inbox": h.inbox})
                assert r.status_code == 200, r.text
                rows = r.json()["deliveries"]
                if rows:
                    return list(rows)
                await asyncio.sleep(0.05)
            return []

        rows = await logged()
    await recv.stop()
    assert rows[0]["outcome"] == "delivered" and rows[0]["status_code"] == 200
    assert rows[0]["url"] == recv.url.split("?")[0]


def test_an_events_inbox_and_seq_come_from_its_subject_and_stream_sequence() -> None:
    from types import SimpleNamespace

    from loom_tasks.webhooks._deliverer import _event_key

    def msg(subject: str, body: dict[str, Any], seq: int) -> Any:
        reply = f"$JS.ACK.LOOM_TASK_EVENTS.loom-task-webhooks.1.{seq}.{seq}.1764547200000000000.0"
        return SimpleNamespace(subject=subject, data=json.dumps(body).encode(), reply=reply)

    loom_event = {"org": "acme", "namespace": "ops", "inbox": "bot", "kind": "created", "task_id": "t-1"}
    assert _event_key(msg("loom.tasks.acme.ops.bot.created", loom_event, 77)) == ("acme", "ops", "bot", 77)
    assert _event_key(msg("loom.tasks.acme.ops.bot.created", {**loom_event, "seq": 5}, 77)) == ("acme", "ops", "bot", 5)
    assert _event_key(msg("loom.tasks.odd", {}, 3)) is None
