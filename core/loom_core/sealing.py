"""Secrets at rest, sealed under LOOM_JWT_SECRET (AES-256-GCM from `cryptography`).

A sealed blob is `v1.<key id>.<base64url(nonce || ciphertext+tag)>`. The key is derived from a
JWT secret with HKDF-SHA256 (a purpose label as `info`, so the same secret never serves two
uses); the key id is the first 8 hex digits of SHA-256 over the derived key, so `open` picks the
right secret (current or LOOM_JWT_SECRET_PREVIOUS) without trying each. `Sealer.reseal` turns a
blob sealed under the previous secret into one under the current secret (`loom secrets reseal`).
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_VERSION = "v1"


class SealError(Exception):
    """A blob that no configured secret opens (wrong secret, tampered, or malformed)."""


def _derive(secret: str, purpose: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"loom-sealing-v1", info=purpose.encode()).derive(secret.encode())


def _key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class Sealer:
    """Seals under the current secret; opens under the current or the previous one."""

    purpose: str
    secret: str
    previous: str = ""

    def _keys(self) -> dict[str, bytes]:
        keys = {}
        for s in (self.secret, self.previous):
            if s:
                k = _derive(s, self.purpose)
                keys[_key_id(k)] = k
        return keys

    def seal(self, plaintext: bytes, associated: bytes = b"") -> str:
        key = _derive(self.secret, self.purpose)
        nonce = os.urandom(12)
        body = AESGCM(key).encrypt(nonce, plaintext, associated or None)
        return f"{_VERSION}.{_key_id(key)}.{base64.urlsafe_b64encode(nonce + body).decode()}"

    def open(self, blob: str, associated: bytes = b"") -> bytes:
        try:
            version, kid, data = blob.split(".", 2)
            raw = base64.urlsafe_b64decode(data.encode())
        except ValueError:
            raise SealError("malformed sealed value") from None
        key = self._keys().get(kid)
        if version != _VERSION or key is None or len(raw) < 12 + 16:
            raise SealError("no configured secret opens this sealed value")
        try:
            return AESGCM(key).decrypt(raw[:12], raw[12:], associated or None)
        except InvalidTag:
            raise SealError("sealed value failed authentication") from None

    def is_current(self, blob: str) -> bool:
        return blob.split(".", 2)[1:2] == [_key_id(_derive(self.secret, self.purpose))]

    def reseal(self, blob: str, associated: bytes = b"") -> str:
        """The same plaintext sealed under the current secret (unchanged when it already is)."""
        return blob if self.is_current(blob) else self.seal(self.open(blob, associated), associated)
