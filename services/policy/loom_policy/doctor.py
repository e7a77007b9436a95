"""The policy plane's `loom doctor` checks (entry point `loom.doctor`: policy): the policy mode
against the rules stored, its decisions stream (and the shared reservations bucket where
LOOM_POLICY_RESERVATIONS=shared), and its tables.

The mode is a fault only where it leaves stored rules unapplied: `off` with live rules means
every `policy.set` an admin made is ignored. `off` with no rules, `shadow` and `enforce` are
deliberate choices the check reports as they are."""

from __future__ import annotations

from loom_core.doctor import Check, DoctorContext, fault, not_applicable, ok, schema_check, stream_checks, unchecked

from .bus import DECISIONS_STREAM, RESERVATIONS
from .settings import PolicySettings
from .store.rules import RuleStore
from .store.schema import MIGRATIONS

MODE = "policy.mode"
STREAM_FIX = "restart a process serving the policy plane (it creates its stream at start: `loom up`, or roll the policy Deployment)"


async def mode_check(ctx: DoctorContext) -> Check:
    mode = ctx.settings.plane(PolicySettings).policy_mode
    if mode != "off":
        return ok(MODE, f"LOOM_POLICY_MODE={mode}" + (" (rules are logged, not enforced)" if mode == "shadow" else ""))
    if ctx.store is None:
        return unchecked(MODE, "LOOM_POLICY_MODE=off; the store did not answer, so the rules stored are unknown")
    try:
        live = len(await RuleStore(ctx.store).all_live())
    except Exception as exc:  # noqa: BLE001 - the store's own errors carry no driver text
        return unchecked(MODE, f"LOOM_POLICY_MODE=off; the rules could not be read ({type(exc).__name__})")
    if live:
        return fault(
            MODE,
            "policy-mode-off",
            f"LOOM_POLICY_MODE=off while {live} history-policy rule(s) are stored: none of them is applied",
            "set LOOM_POLICY_MODE=enforce (or shadow to log decisions first) on every replica and restart them",
        )
    return ok(MODE, "LOOM_POLICY_MODE=off and no history-policy rules are stored")


async def checks(ctx: DoctorContext) -> list[Check]:
    settings = ctx.settings.plane(PolicySettings)
    streams = [DECISIONS_STREAM]
    if settings.policy_reservations == "shared":
        streams.append(f"KV_{RESERVATIONS.name}")
    if settings.policy_mode == "off":  # the gate is off: it declares nothing on the bus
        bus = [not_applicable(f"nats.stream.{s}", "LOOM_POLICY_MODE=off: the gate keeps no stream") for s in streams]
    else:
        bus = await stream_checks(ctx, streams, "policy", STREAM_FIX)
    return [await mode_check(ctx), *bus, await schema_check(ctx, "policy", MIGRATIONS)]
