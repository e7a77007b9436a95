"""A sign-in link's URL. Apart from `sessions` so that `loom admin login-link`, which asks the
running server for the code and prints the link, imports neither the bus nor the store."""

from __future__ import annotations


def login_url(base_url: str, code: str) -> str:
    return f"{base_url.rstrip('/')}/login#code={code}"
