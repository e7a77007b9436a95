"""The shipped docs are public copy: no hosts, keys, secrets or internal-only names, and every
relative link lands on a page and an anchor that exist."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest
from loom_help.domain.sections import split_page

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md"))

# Hosts a page may name: loopback, documentation names, where Loom's own code is published, and
# the official NATS Helm chart repository the chart depends on.
ALLOWED_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "example.com", "example.org", "example.net", "github.com", "nats-io.github.io"}
URL = re.compile(r"\bhttps?://([A-Za-z0-9.-]+)")
IP = re.compile(r"\b(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})\b")
SECRETS = {
    "a token (JWT)": re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    "a private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "an nkey seed": re.compile(r"\bS[ACOPU][A-Z2-7]{54,}\b"),
    "a provider API key": re.compile(r"\b(sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{30,}|xox[bp]-[A-Za-z0-9-]{20,})"),
    "a long hex secret": re.compile(r"\b[0-9a-f]{40,}\b"),
}
# Names of the workplace Loom is built in, which mean nothing to a reader of the docs.
INTERNAL = re.compile(r"/work/|\.\./shared/|\bshared/(spec|bench-data)\b|\bbriefs?/|\.library\b|\bissue-\d+\b|\b00[03]_[0-9a-f]{8,}")


def rel(page: Path) -> str:
    return page.relative_to(DOCS).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_hosts_beyond_loopback_and_examples(page: Path) -> None:
    text = page.read_text()
    # A single-label name (`gateway`, `librechat`) is a service of the deployment the page
    # describes (a Compose service, a Kubernetes Service), not a host on anyone's network.
    hosts = {h.lower().rstrip(".") for h in URL.findall(text) if "." in h.rstrip(".")} - ALLOWED_HOSTS
    assert not hosts, f"{rel(page)} names hosts {sorted(hosts)}"
    public = [ip for ip in IP.findall(text) if _is_public(ip)]
    assert not public, f"{rel(page)} names addresses {public}"


def _is_public(ip: str) -> bool:
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False  # a version number such as 1.2.3.4000
    doc_ranges = [ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")]
    return addr.is_global and not any(addr in n for n in doc_ranges)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_keys_or_secrets(page: Path) -> None:
    text = page.read_text()
    found = [what for what, pattern in SECRETS.items() if pattern.search(text)]
    assert not found, f"{rel(page)} holds {found}"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_internal_names(page: Path) -> None:
    names = {m.group() for m in INTERNAL.finditer(page.read_text())}
    assert not names, f"{rel(page)} names {sorted(names)}"


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_land_on_a_page_and_anchor(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_file():
            broken.append(target)
            continue
        if anchor and dest.suffix == ".md":
            anchors = {s.anchor for s in split_page(dest.name, dest.read_text()).sections}
            if anchor not in anchors:
                broken.append(target)
    assert not broken, f"{rel(page)} links to {broken}"
