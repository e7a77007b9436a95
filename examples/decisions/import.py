"""docs/decisions.md, import: `.venv/bin/python examples/decisions/import.py`."""

import asyncio
import json
import tempfile
from pathlib import Path

from loom import Agent

CHUNK = 50  # records a call: decision.record_many takes up to 500


async def main() -> None:
    # An export to load: one decision.record body a line (JSON Lines).
    export = Path(tempfile.mkdtemp()) / "decisions.jsonl"
    bodies = [
        {"category": "queue", "scenario": f"work queue for service {i}", "outcome": "NATS JetStream", "reasoning": "we already run it"}
        for i in range(120)
    ]
    export.write_text("".join(json.dumps(b) + "\n" for b in bodies))

    records = [json.loads(line) for line in export.read_text().splitlines() if line.strip()]
    async with Agent.from_env("docs") as agent:
        for attempt in ("first", "retried"):
            written = 0
            for start in range(0, len(records), CHUNK):
                out = await agent.ops.decision.record_many(records=records[start : start + CHUNK])
                for i, result in enumerate(out["results"]):
                    if "error" in result:  # a locked key or a pinned row refuses its record only
                        print(f"line {start + i + 1}: {result['error']['code']}")
                    elif not (result["decision"]["restated"] and not result["decision"]["superseded_prior"]):
                        written += 1
            print(f"{attempt} import: {written} of {len(records)} written")
            assert written == (len(records) if attempt == "first" else 0)  # a retry writes nothing twice


asyncio.run(main())
