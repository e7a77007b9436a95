"""Follow an inbox's events as server-sent events (GET /v1/task/watch), then resume after one."""

import json
import os

import httpx

url = os.environ.get("LOOM_URL", "http://127.0.0.1:8080")
headers = {
    "Authorization": f"Bearer {os.environ['LOOM_TOKEN']}",
    "X-Loom-Org": os.environ["LOOM_ORG"],
    "X-Loom-Namespace": os.environ["LOOM_NAMESPACE"],
}

with httpx.Client(base_url=url, headers=headers, timeout=60) as loom:
    loom.post("/v1/inbox.register", json={"inbox": "watch-demo"}).raise_for_status()
    loom.post("/v1/task.create", json={"inbox": "watch-demo", "kind": "chore", "title": "watch me"}).raise_for_status()

    def first_event(**extra: str) -> dict:
        """The first event of the stream (a `data:` line), or {} after a heartbeat with none."""
        params = {"inbox": "watch-demo", "heartbeat_seconds": "2"}
        with loom.stream("GET", "/v1/task/watch", params=params, headers=extra) as stream:
            stream.raise_for_status()
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    return json.loads(line[len("data: ") :])
                if line == ": heartbeat":
                    return {}
        return {}

    event = first_event()
    print(event["seq"], event["kind"], event["title"])
    # A reconnect names the last event it handled and reads only what came after it.
    print("after it:", first_event(**{"Last-Event-ID": str(event["seq"])}) or "nothing yet")
