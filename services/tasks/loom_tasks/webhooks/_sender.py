"""One webhook POST, to an address the guard checked at this very delivery.

The URL's host is resolved and checked now (never cached), then the request goes to the checked
IP itself: the original name stays the Host header and the TLS SNI (and the certificate is
verified against the name). No redirect is followed, proxies from the environment are ignored,
timeouts are short, and no connection is kept for reuse (a pooled connection is keyed by IP, so
it could otherwise carry one name's request over a TLS session made for another name).
"""

from __future__ import annotations

import ipaddress
import ssl
import time
from dataclasses import dataclass

import httpx

from ._guard import AddressRefused, ResolutionFailed, Resolver, check_host, system_resolve


@dataclass(frozen=True, slots=True)
class SendResult:
    outcome: str  # delivered | failed | refused
    retryable: bool
    status_code: int = 0
    error: str = ""
    address: str = ""
    duration_ms: float = 0.0


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _caused_by_tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def default_ssl_context() -> ssl.SSLContext:
    # The system's trust store (where an operator adds a private CA), made once per deliverer.
    return ssl.create_default_context()


class Sender:
    def __init__(
        self,
        *,
        timeout_seconds: float,
        allow_loopback: bool = False,
        resolver: Resolver = system_resolve,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        self.timeout = httpx.Timeout(timeout_seconds, connect=min(timeout_seconds, 3.0))
        self.allow_loopback = allow_loopback
        self.resolver = resolver
        self.verify = verify or default_ssl_context()

    async def send(self, url: str, body: bytes, headers: dict[str, str]) -> SendResult:
        started = time.monotonic()

        def done(outcome: str, retryable: bool, status: int = 0, error: str = "", address: str = "") -> SendResult:
            return SendResult(outcome, retryable, status, error, address, round((time.monotonic() - started) * 1000, 3))

        target = httpx.URL(url)
        host = target.raw_host.decode("ascii")  # IDNA form; an IPv6 literal without brackets
        port = target.port or (443 if target.scheme == "https" else 80)
        try:
            checked = await check_host(host, port, resolver=self.resolver, allow_loopback=self.allow_loopback)
        except AddressRefused as exc:
            return done("refused", False, error=f"address_refused:{exc.reason}", address=exc.address)
        except ResolutionFailed:
            return done("failed", True, error="dns_failed")

        host_header = f"[{host}]" if ":" in host else host
        if target.port is not None:
            host_header += f":{target.port}"
        extensions = {"sni_hostname": host} if target.scheme == "https" and not _is_ip(host) else {}
        last = done("failed", True, error="connect_error")
        for address in checked.addresses:
            pinned = target.copy_with(host=address)
            try:
                async with (
                    httpx.AsyncClient(
                        verify=self.verify,
                        trust_env=False,
                        follow_redirects=False,
                        timeout=self.timeout,
                        limits=httpx.Limits(max_keepalive_connections=0),
                    ) as client,
                    client.stream("POST", pinned, content=body, headers={**headers, "Host": host_header}, extensions=extensions) as resp,
                ):
                    status = resp.status_code
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                # Not connected at all: the next checked address may answer.
                error = (
                    "connect_timeout" if isinstance(exc, httpx.ConnectTimeout) else "tls_error" if _caused_by_tls(exc) else "connect_error"
                )
                last = done("failed", True, error=error, address=address)
                continue
            except httpx.TimeoutException:
                return done("failed", True, error="timeout", address=address)
            except httpx.HTTPError as exc:
                return done("failed", True, error=f"http_error:{type(exc).__name__}", address=address)
            if 200 <= status < 300:
                return done("delivered", False, status, address=address)
            if 300 <= status < 400:
                return done("failed", False, status, "redirect_not_followed", address)
            retryable = status in (408, 425, 429) or status >= 500
            return done("failed", retryable, status, f"http_{status}", address)
        return last
