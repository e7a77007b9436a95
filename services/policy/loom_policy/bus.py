"""The policy plane's bus, declared in one place: its subjects and its consumers.

Both are core NATS (no stream, at most once): a lost rule push is caught up by the rule
book's periodic reload, a lost feed batch by the window rebuild on reconnect.
"""

from __future__ import annotations

from loom_core.bus import BusLayout, Consumer

RULES_SUBJECT = "loom.policy.rules"
FEED_SUBJECT = "loom.policy.feed"

RULE_PUSHES = Consumer(
    "policy-rule-pushes", RULES_SUBJECT, ack=None, description="a namespace's rules changed on another replica: reload them"
)
HISTORY_FEED = Consumer(
    "policy-history-feed", FEED_SUBJECT, ack=None, description="other replicas' ledger rows and exposures for the live history windows"
)

LAYOUT = BusLayout(consumers=(RULE_PUSHES, HISTORY_FEED))
