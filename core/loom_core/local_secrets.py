"""Secrets a single-host Loom keeps in its data dir, and the check every server start makes.

`loom up` on a fresh data dir generates the token-signing key (LOOM_JWT_SECRET) and, for its
embedded nats-server, Loom's internal NATS user, password and auth-callout issuer seed, into
`LOOM_DATA_DIR/secrets.json` (mode 0600), and reuses them on every later start (and `loom
admin bootstrap` on the same data dir signs with the same key). A value set in the environment
wins over the file. With LOOM_JWT_SECRET set, no signing key is generated or stored: the file
notes that the key comes from the environment instead, so a later start without it is refused
(saying so) rather than silently signing with another key. `loom serve` (cluster mode) has no
data dir of its own: it refuses the built-in default or a secret shorter than 32 bytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import nkeys

from .data_dir import served_by

if TYPE_CHECKING:
    from .settings import Settings

# Refused by every server start (check_jwt_secret). Here, not in settings, so that a process
# that only reads or creates the data dir's secrets does not import pydantic-settings.
DEFAULT_JWT_SECRET = "dev-insecure-change-me"
# The NATS user Loom's own connections use on the embedded nats-server.
DEFAULT_INTERNAL_USER = "loom-internal"

MIN_SECRET_BYTES = 32
FILE_NAME = "secrets.json"
LOCK_NAME = "secrets.json.lock"
HOW_TO_SET = (
    "set LOOM_JWT_SECRET to at least 32 random bytes, e.g. "
    "export LOOM_JWT_SECRET=\"$(python3 -c 'import secrets; print(secrets.token_urlsafe(48))')\" "
    "(the same value on every replica; `loom up` generates one into LOOM_DATA_DIR/secrets.json)"
)


class WeakSecret(ValueError):
    """The token-signing key is the default or too short; the message says how to set one."""


def check_jwt_secret(secret: str) -> None:
    if not secret or secret == DEFAULT_JWT_SECRET:
        raise WeakSecret(f"LOOM_JWT_SECRET is not set (the built-in development default is refused): {HOW_TO_SET}")
    n = len(secret.encode())
    if n < MIN_SECRET_BYTES:
        raise WeakSecret(f"LOOM_JWT_SECRET is {n} bytes, shorter than {MIN_SECRET_BYTES}: {HOW_TO_SET}")


# Written instead of a key when LOOM_JWT_SECRET comes from the environment.
KEY_FROM_ENVIRONMENT = "jwt_secret_from_environment"


def new_account_seed() -> str:
    """A fresh account nkey seed (SA…): the auth callout's issuer. Here, not in the bus package,
    which imports faststream (~1 CPU-s) that reading or creating the data dir's secrets never uses."""
    return str(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_ACCOUNT).decode())


def _generated(jwt_from_environment: bool) -> dict[str, str]:
    key = {KEY_FROM_ENVIRONMENT: "true"} if jwt_from_environment else {"jwt_secret": secrets.token_urlsafe(48)}
    return {
        **key,
        "nats_internal_user": DEFAULT_INTERNAL_USER,
        "nats_internal_password": secrets.token_urlsafe(32),
        "nats_auth_callout_issuer_seed": new_account_seed(),
    }


def load_or_create(data_dir: Path, jwt_from_environment: bool = False) -> dict[str, str]:
    """The data dir's secrets, generated (mode 0600) on first use; keys missing from an older
    file are added (the signing key only when the environment sets none). Never logged.
    Processes starting on one data dir at once (`loom up` and `loom admin bootstrap` in the
    README's first steps) take turns under a lock file: one creates the file whole, the others
    read it (unlocked, a reader could find the file created and still empty)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / LOCK_NAME, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        return _load_or_create(data_dir / FILE_NAME, jwt_from_environment)


def _load_or_create(path: Path, jwt_from_environment: bool) -> dict[str, str]:
    fresh = _generated(jwt_from_environment)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            json.dump(fresh, f)
        return fresh
    os.chmod(path, 0o600)
    stored = json.loads(path.read_text())
    if not isinstance(stored, dict):
        raise ValueError(f"{path} is not a JSON object")
    values = {k: str(v) for k, v in stored.items()}
    missing = {k: v for k, v in fresh.items() if not values.get(k)}
    if values.get("jwt_secret") or values.get(KEY_FROM_ENVIRONMENT):
        # The key's source is settled on first use: never a generated key beside the
        # environment's, nor the note beside a stored key.
        missing.pop("jwt_secret", None)
        missing.pop(KEY_FROM_ENVIRONMENT, None)
    if missing:
        values.update(missing)
        tmp = path.with_suffix(".tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(values, f)
        os.replace(tmp, path)
    return values


def with_local_secrets(settings: Settings) -> Settings:
    """Settings for a process that owns LOOM_DATA_DIR (`loom up`, `loom admin bootstrap` on it):
    unset secrets come from the data dir's file; the signing key must then pass the check."""
    from_environment = bool(settings.jwt_secret) and settings.jwt_secret != DEFAULT_JWT_SECRET
    values = load_or_create(settings.data_dir.resolve(), from_environment)
    update: dict[str, str] = {}
    if not from_environment:
        if not values.get("jwt_secret"):
            raise WeakSecret(
                f"LOOM_JWT_SECRET is not set, and the tokens of {settings.data_dir} were signed with the LOOM_JWT_SECRET "
                "of the environment it was first started with: set that value again"
            )
        update["jwt_secret"] = values["jwt_secret"]
    if not settings.nats_url:
        # The embedded nats-server is configured with these; an external one knows its own.
        if not settings.nats_internal_user:
            update["nats_internal_user"] = values["nats_internal_user"]
            if not settings.nats_internal_password:
                update["nats_internal_password"] = values["nats_internal_password"]
        if not settings.nats_auth_callout_issuer_seed:
            update["nats_auth_callout_issuer_seed"] = values["nats_auth_callout_issuer_seed"]
    out = settings.model_copy(update=update)
    check_jwt_secret(out.jwt_secret)
    return out


def owned_secrets(settings: Settings) -> Settings:
    """A maintenance command's settings (`loom ch-setup`, `loom secrets reseal`): on the embedded
    store the command owns LOOM_DATA_DIR, as `loom up` does, so unset secrets come from the data
    dir's file and a row is sealed under the key the server uses. A weak key ends the command with
    a message that says how to set one."""
    if settings.clickhouse_url:
        return settings
    serving = served_by(settings.data_dir)
    if serving is not None:
        raise SystemExit(f"loom: this command opens the embedded store, which a running Loom holds: {serving}, then run it again")
    try:
        return with_local_secrets(settings)
    except WeakSecret as exc:
        raise SystemExit(f"loom: {exc}") from None
