"""docker-compose.yaml, checked as `docker compose config` would (interpolated from a filled-in
.env.example, then parsed and validated against the Compose specification by `compose-spec`),
plus the facts the deployment rests on, as data: health checks and depends_on on health, one
published port, every Loom service a `loom serve` the runner accepts, and the assistant
profile's isolation (spec 000, "Deployment")."""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import compose_spec
import pytest
import yaml
from loom_core.bus.natsserver import nats_server_binary
from loom_core.settings import Settings
from loom_runner.cluster import plane_addresses, serve_problem

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yaml"
ENV_EXAMPLE = ROOT / ".env.example"
LOOM_SERVICES = {"tasks", "policy", "decisions", "help", "insights", "assistant-bridge", "gateway"}
PLANES = {"identity", "tasks", "policy", "decisions", "help", "insights", "assistant"}
_VAR = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


class MissingVariable(KeyError):
    pass


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's interpolation: $$, ${V}, ${V:-d}, ${V-d}, ${V:?e}, ${V?e}."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group(1) or m.group(4), m.group(2), m.group(3) or ""
        value = env.get(name)
        if op in (":-", ":?") and not value:
            value = None
        if value is None:
            if op and op.endswith("-"):
                return arg
            if op and op.endswith("?"):
                raise MissingVariable(f"{name}: {arg}")
            return ""
        return value

    return _VAR.sub(one, text)


def env_example() -> dict[str, str]:
    """.env.example with every empty value filled in, as an operator would."""
    out: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, value = line.partition("=")
        value = value.split(" #")[0].strip()
        out[name] = value or f"filled-{name.lower()}"
    return out


def config(env: dict[str, str] | None = None) -> dict[str, Any]:
    text = interpolate(COMPOSE.read_text(), env_example() if env is None else env)
    parsed = compose_spec.PyOptions(apply_merge=True).from_yaml(text)
    parsed.validate()
    data = yaml.safe_load(text)
    assert set(parsed.service_names()) == set(data["services"])
    return dict(data)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return config()


def networks_of(service: dict[str, Any]) -> set[str]:
    nets = service.get("networks") or ["default"]
    return set(nets if isinstance(nets, list) else nets.keys())


def test_the_file_is_valid_compose_once_env_is_filled_in(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == LOOM_SERVICES | {"nats", "clickhouse", "librechat", "librechat-mongo"}


def test_a_missing_secret_stops_compose_before_anything_starts() -> None:
    for name in ("LOOM_JWT_SECRET", "CLICKHOUSE_PASSWORD", "LOOM_NATS_INTERNAL_PASSWORD", "LOOM_NATS_AUTH_CALLOUT_ISSUER_SEED"):
        env = {k: v for k, v in env_example().items() if k != name}
        with pytest.raises(MissingVariable, match=name):
            config(env)


def test_every_variable_compose_reads_is_in_env_example() -> None:
    used = {m.group(1) or m.group(4) for m in _VAR.finditer(COMPOSE.read_text()) if m.group(0) != "$$"}
    used -= {"LOOM_IMAGE"}
    assert used <= set(env_example()), used - set(env_example())


def test_only_the_gateway_publishes_a_port(compose: dict[str, Any]) -> None:
    published = {name for name, s in compose["services"].items() if s.get("ports")}
    assert published == {"gateway"}
    assert compose["services"]["gateway"]["ports"] == ["8080:8080"]


def test_every_loom_service_is_one_image_hardened_and_health_checked(compose: dict[str, Any]) -> None:
    images = {compose["services"][s]["image"] for s in LOOM_SERVICES}
    assert images == {"loom:latest"}
    for name in LOOM_SERVICES:
        s = compose["services"][name]
        assert s["read_only"] is True and s["cap_drop"] == ["ALL"] and "no-new-privileges:true" in s["security_opt"], name
        assert not s["user"].startswith("0"), name
        probe = s["healthcheck"]["test"]
        assert probe[:4] == ["CMD", "python", "-m", "loom_runner.probe"], name
        want = "http://127.0.0.1:8080/v1/health/ready" if name == "gateway" else "grpc://127.0.0.1:7000"
        assert probe[4] == want, name


def test_depends_on_waits_on_health(compose: dict[str, Any]) -> None:
    for name, s in compose["services"].items():
        for dep, cond in (s.get("depends_on") or {}).items():
            assert dep in compose["services"], (name, dep)
            assert cond == {"condition": "service_healthy"}, (name, dep)
            assert "healthcheck" in compose["services"][dep], f"{name} waits on {dep}, which has no health check"
    for name in LOOM_SERVICES:
        assert {"nats", "clickhouse"} <= set(compose["services"][name]["depends_on"]), name
    assert LOOM_SERVICES - {"gateway"} <= set(compose["services"]["gateway"]["depends_on"])


def test_every_loom_service_runs_a_loom_serve_the_runner_accepts(compose: dict[str, Any]) -> None:
    served: dict[str, str] = {}
    for name in LOOM_SERVICES:
        s = compose["services"][name]
        cmd = s["command"]
        gateway = "--gateway" in cmd
        planes = set(cmd[cmd.index("--planes") + 1].split(",")) if "--planes" in cmd else set()
        assert planes <= PLANES, (name, planes)
        env = {k.removeprefix("LOOM_").lower(): v for k, v in s["environment"].items() if k.startswith("LOOM_")}
        settings = Settings(**env)
        assert serve_problem(settings, planes, gateway) is None, name
        assert settings.grpc_host == "0.0.0.0" and settings.grpc_port_base == 7000
        served.update(dict.fromkeys(planes - {"identity"}, name))
        if gateway:
            relayed = plane_addresses(settings)
    # The gateway relays every plane to the service that serves it, on its gRPC port.
    assert relayed == {plane: f"{svc}:7000" for plane, svc in served.items()}
    assert set(served) == PLANES - {"identity"}


def test_the_assistant_profile_isolates_librechat_and_its_database(compose: dict[str, Any]) -> None:
    services, nets = compose["services"], compose["networks"]
    lc, mongo = services["librechat"], services["librechat-mongo"]
    assert lc["profiles"] == ["assistant"] and mongo["profiles"] == ["assistant"]
    assert "ports" not in lc and "ports" not in mongo
    assert nets["assistant"]["internal"] is True and nets["assistant-db"]["internal"] is True
    assert not nets["assistant-egress"].get("internal")
    members = {net: {n for n, s in services.items() if net in networks_of(s)} for net in nets}
    assert members["assistant-db"] == {"librechat", "librechat-mongo"}, "Loom, which builds repository code, cannot reach MongoDB"
    assert members["assistant-egress"] == {"librechat"}, "LibreChat alone has a route out"
    # LibreChat and the Loom services that talk to it: the bridge calls its agents API, and it
    # calls the gateway's /mcp with each answer's token.
    assert members["assistant"] == {"librechat", "assistant-bridge", "gateway"}
    assert networks_of(mongo) == {"assistant-db"}
    assert networks_of(lc) == {"assistant", "assistant-db", "assistant-egress"}


def test_librechat_gets_only_its_own_librechat_secrets_and_its_configuration_from_deploy(compose: dict[str, Any]) -> None:
    raw = yaml.safe_load(COMPOSE.read_text())["services"]["librechat"]
    assert "env_file" not in raw, "LibreChat must not load .env, which holds Loom's secrets"
    refs = {m.group(1) or m.group(4) for v in raw["environment"].values() for m in _VAR.finditer(str(v))}
    assert refs == {
        "LIBRECHAT_CREDS_KEY",
        "LIBRECHAT_CREDS_IV",
        "LIBRECHAT_JWT_SECRET",
        "LIBRECHAT_JWT_REFRESH_SECRET",
        "LIBRECHAT_ANTHROPIC_API_KEY",
    }
    assert refs <= set(env_example())
    assert not any(Settings.model_fields.get(r.lower()) for r in refs)
    env = compose["services"]["librechat"]["environment"]
    assert (env["BAN_VIOLATIONS"], env["ALLOW_UNVERIFIED_EMAIL_LOGIN"], env["ALLOW_REGISTRATION"]) == ("false", "true", "true")
    assert env["MONGO_URI"].startswith("mongodb://librechat-mongo:27017/")
    assert "./deploy/librechat/assistant.librechat.yaml:/app/librechat.yaml:ro" in raw["volumes"]
    assert env["CONFIG_PATH"] == "/app/librechat.yaml"
    assert not any(k.startswith(("OTEL_", "LANGFUSE_")) for k in env), "no tracing variable: it would export request bodies"
    bridge = compose["services"]["assistant-bridge"]["environment"]
    # Wired to the profile's LibreChat by default; an operator empties it to run without one.
    assert bridge["LOOM_ASSISTANT_LIBRECHAT_URL"] == "http://librechat:3080"
    assert "${LOOM_ASSISTANT_LIBRECHAT_URL-http://librechat:3080}" in COMPOSE.read_text()
    # The gateway relays the chat route to the bridge's HTTP listener (no bridge in its process).
    host_port = bridge["LOOM_ASSISTANT_BRIDGE_LISTEN"].rpartition(":")[2]
    gateway = compose["services"]["gateway"]["environment"]
    assert gateway["LOOM_ASSISTANT_BRIDGE_URL"] == f"http://assistant-bridge:{host_port}"
    assert bridge["LOOM_ASSISTANT_LOOM_URL"] == "http://gateway:8080"


def test_clickhouse_runs_with_the_access_control_configuration(compose: dict[str, Any]) -> None:
    ch = compose["services"]["clickhouse"]
    mount = "./deploy/clickhouse-config/access_control.xml:/etc/clickhouse-server/config.d/access_control.xml:ro"
    assert mount in ch["volumes"] and any(v.endswith(":/var/lib/clickhouse") for v in ch["volumes"])
    root = ET.parse(ROOT / "deploy/clickhouse-config/access_control.xml").getroot()
    # The three settings docs/operations/analysis.md says the shipped configuration sets.
    improvements = root.find("access_control_improvements")
    assert improvements is not None
    assert {c.tag: c.text for c in improvements} == {
        "users_without_row_policies_can_read_rows": "false",
        "select_from_system_db_requires_grant": "true",
        "select_from_information_schema_requires_grant": "true",
    }


def test_the_nats_service_configuration_is_valid_for_the_real_nats_server(compose: dict[str, Any], tmp_path: Path) -> None:
    nats = compose["services"]["nats"]
    assert nats["image"].startswith("nats:") and "nats-data:/data" in nats["volumes"]
    assert "./deploy/nats:/etc/nats:ro" in nats["volumes"]
    env = {k: str(v) for k, v in nats["environment"].items()}
    env["NATS_AUTH_CALLOUT_ISSUER"] = "ABQALO726KPHYPHEJFQ4B4HYJBZSZCILX3ZH4DOUO2EJU5SUC4HJPSWV"
    out = subprocess.run([nats_server_binary(), "-c", str(ROOT / "deploy/nats/nats.conf"), "-t"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr + out.stdout
    text = (ROOT / "deploy/nats/nats.conf").read_text()
    assert "store_dir: /data" in text and "include ./loom-accounts.conf" in text


def test_the_shipped_nats_accounts_are_those_loom_up_renders() -> None:
    """deploy/nats/loom-accounts.conf (Compose, the cluster docs) and the configuration `loom up`
    gives its own nats-server name the same accounts, export, import and auth callout."""
    from loom_core.bus.auth_callout import render_nats_config

    values = {"LOOM_NATS_INTERNAL_USER": "loom-internal", "LOOM_NATS_INTERNAL_PASSWORD": "pw", "NATS_SYS_USER": "loom-internal-sys"}
    values["NATS_AUTH_CALLOUT_ISSUER"] = "ABQALO726KPHYPHEJFQ4B4HYJBZSZCILX3ZH4DOUO2EJU5SUC4HJPSWV"
    shipped = (ROOT / "deploy/nats/loom-accounts.conf").read_text()
    for name, value in values.items():
        shipped = shipped.replace(f"${name}", value)
    rendered = render_nats_config(
        issuer_public_key=values["NATS_AUTH_CALLOUT_ISSUER"], internal_user="loom-internal", internal_password="pw"
    )

    def tokens(text: str) -> list[str]:
        body = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
        return re.findall(r"[A-Za-z0-9_.>:-]+", body)

    assert tokens(shipped) == tokens(rendered)
