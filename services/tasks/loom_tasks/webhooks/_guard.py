"""The SSRF guard: which addresses a webhook delivery may connect to.

Spec 003: each delivery resolves the webhook host, refuses loopback, private, link-local (cloud
metadata) and multicast addresses, and connects to the address it checked. Here a host is
refused when ANY address it resolves to is bad, so a name that answers one public and one
internal address cannot be used to reach the internal one. An IPv6 address that carries an IPv4
address (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4,
Teredo) is judged by the IPv4 address too.

The only exception is loopback under an explicit test-only allowance (off by default), so tests
can reach a receiver on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class AddressRefused(Exception):
    """The host resolves to an address a webhook may not reach."""

    def __init__(self, reason: str, address: str) -> None:
        super().__init__(f"{reason}: {address}")
        self.reason = reason
        self.address = address


class ResolutionFailed(Exception):
    """The host did not resolve (may be temporary: the delivery is retried)."""


def _carried_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address is only a wrapper for (mapped, compatible, NAT64)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    packed = int(ip)
    if packed >> 32 == 0 and packed > 1:  # IPv4-compatible ::a.b.c.d (:: and ::1 are IPv6's own)
        return ipaddress.IPv4Address(packed)
    if ip in _NAT64:
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    return None


def _tunnelled_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses a tunnelling IPv6 address leads to (6to4, Teredo)."""
    found: list[ipaddress.IPv4Address] = []
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def _why_bad(ip: IPAddress) -> str | None:
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_link_local:
        return "link_local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private"
    if ip.is_reserved:
        return "reserved"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "private"
    if not ip.is_global:
        # Shared address space (100.64/10), benchmarking, documentation ranges and the like.
        return "not_global"
    return None


def refusal(address: str, *, allow_loopback: bool = False) -> str | None:
    """Why a webhook may not connect to `address`, or None when it may."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        carried = _carried_ipv4(ip)
        if carried is not None:
            # A wrapper is judged by the IPv4 address it reaches; the loopback allowance never
            # covers one (tests use the plain 127.0.0.1).
            return _why_bad(carried)
        for tunnelled in _tunnelled_ipv4(ip):
            why = _why_bad(tunnelled)
            if why is not None:
                return why
    why = _why_bad(ip)
    if why == "loopback" and allow_loopback:
        # TESTS ONLY: the plain loopback address, and nothing else internal.
        return None
    return why


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for host (A and AAAA)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ResolutionFailed(host) from exc
    out: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        addr = str(sockaddr[0])
        if addr not in out:
            out.append(addr)
    return out


@dataclass(frozen=True, slots=True)
class CheckedHost:
    name: str
    addresses: tuple[str, ...]  # every one passed the guard


async def check_host(host: str, port: int, *, resolver: Resolver = system_resolve, allow_loopback: bool = False) -> CheckedHost:
    """Resolve host now and check every address; raise AddressRefused if any is bad."""
    try:
        literal = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        literal = None
    addresses = [str(literal)] if literal is not None else list(await resolver(host, port))
    if not addresses:
        raise ResolutionFailed(host)
    for addr in addresses:
        try:
            why = refusal(addr, allow_loopback=allow_loopback)
        except ValueError:
            raise AddressRefused("unparseable", addr) from None
        if why is not None:
            raise AddressRefused(why, addr)
    return CheckedHost(host, tuple(addresses))
