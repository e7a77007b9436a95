"""`loom doctor`'s arguments; its checks (doctor.py, which imports the bus, the store and httpx)
load only when the command runs, so `loom --help` and the other commands do not pay for them."""

from __future__ import annotations

import argparse
from typing import Any

from loom_core.settings import Settings

COMMANDS = ("doctor",)


def add_commands(sub: Any) -> None:
    doctor = sub.add_parser("doctor", help="check the deployment and name each fault with the command that fixes it")
    doctor.add_argument("--json", action="store_true", help="print the checks as one JSON object")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    from .doctor import run_command as run_doctor

    return run_doctor(args, settings)
