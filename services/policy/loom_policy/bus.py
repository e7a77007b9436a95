"""The policy plane's bus, declared in one place: its subjects and its consumers.

Both are core NATS (no stream, at most once): a lost rule push is caught up by the rule
book's periodic reload, a lost feed batch by the window rebuild on reconnect.
"""

from __future__ import annotations

from faststream.nats import NatsBroker
from loom_core.bus import AckPolicy, BusLayout, Consumer, KVBucket
from nats.js.api import ConsumerConfig, RetentionPolicy, StreamConfig

RULES_SUBJECT = "loom.policy.rules"
FEED_SUBJECT = "loom.policy.feed"

RULE_PUSHES = Consumer(
    "policy-rule-pushes", RULES_SUBJECT, ack=None, description="a namespace's rules changed on another replica: reload them"
)
HISTORY_FEED = Consumer(
    "policy-history-feed", FEED_SUBJECT, ack=None, description="other replicas' ledger rows and exposures for the live history windows"
)

# Decision rows, durable before they reach the table: each replica publishes its batches to a
# work-queue stream, and one durable consumer shared by the replicas inserts each batch once
# (its batch id as the insert's deduplication token), so a crash after a publish loses nothing.
DECISIONS_STREAM = "LOOM_POLICY_DECISIONS"
DECISIONS_SUBJECT = "loom.policy.decisions.batch"
DECISION_BATCHES = Consumer(
    "policy-decisions-writer",
    DECISIONS_SUBJECT,
    stream=DECISIONS_STREAM,
    durable="policy-decisions-writer",
    ack=AckPolicy.NACK_ON_ERROR,
    pull_batch=50,
    pull_timeout_seconds=1.0,
    config=ConsumerConfig(ack_wait=30, max_ack_pending=1000),
    description="decision batches from every replica -> loom.policy_decisions (batch id = insert dedup token)",
)

# Calls in flight of every subject, shared by the replicas (LOOM_POLICY_RESERVATIONS=shared): one
# key per (org, namespace, subject), written with compare-and-set (store/reservations.py).
RESERVATIONS = KVBucket("policy_reservations", ttl=600.0)

LAYOUT = BusLayout(
    streams=(StreamConfig(name=DECISIONS_STREAM, subjects=[DECISIONS_SUBJECT], retention=RetentionPolicy.WORK_QUEUE, max_age=7 * 86400),),
    consumers=(RULE_PUSHES, HISTORY_FEED, DECISION_BATCHES),
    buckets=(RESERVATIONS,),
)


def declare(broker: NatsBroker) -> None:
    """The policy plane's subjects in the AsyncAPI document (the `loom.asyncapi` entry point)."""
    LAYOUT.describe(broker)
