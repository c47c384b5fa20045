#!/usr/bin/env python3
"""Publishes the notifications given as a JSON array on stdin, one after the
other, and prints a JSON array with the outcome of each on stdout: what an
account service's batch job or smoke test would do, and what the repository's
end-to-end test runs against a deployed stack.

    INTENT_QUEUE_URL=... CONTENT_KEY_ARN=... python examples/publish_json.py < notifications.json

Each notification is an object with the intent's member names (challenge_id,
channel, workflow {kind, order}, destination_ref, subject_ref (optional),
expires_at as RFC 3339, template_id, template_version, policy_version) and
message {to, subject, body}. The messages (addresses, reset links) come on
stdin, not in arguments, so no process listing shows them; the output holds
only ids, keys and hashes, never a message.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime
from typing import Any

from resetledger_producer import Message, Notification, Producer, ProducerError, Workflow


def parse_time(s: str) -> datetime:
    """An RFC 3339 time with any number of fraction digits (Python 3.10's
    fromisoformat takes only 3 or 6; the microseconds are kept)."""
    m = re.fullmatch(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|z|[+-]\d\d:\d\d)", s)
    if m is None:
        raise ValueError("expires_at: want an RFC 3339 date-time")
    whole, frac, offset = m.groups()
    frac = ((frac or "") + "000000")[:6]
    return datetime.fromisoformat(f"{whole}.{frac}{'+00:00' if offset in ('Z', 'z') else offset}")


def notification(d: dict[str, Any]) -> Notification:
    wf, m = d["workflow"], d["message"]
    return Notification(
        challenge_id=d["challenge_id"],
        channel=d["channel"],
        workflow=Workflow(kind=wf["kind"], order=tuple(wf.get("order") or ())),
        destination_ref=d["destination_ref"],
        subject_ref=d.get("subject_ref"),
        expires_at=parse_time(d["expires_at"]),
        template_id=d["template_id"],
        template_version=d["template_version"],
        policy_version=d["policy_version"],
        message=Message(to=m["to"], subject=m.get("subject", ""), body=m["body"]),
    )


def main() -> int:
    queue_url, key_id = os.environ.get("INTENT_QUEUE_URL", ""), os.environ.get("CONTENT_KEY_ARN", "")
    if not queue_url or not key_id:
        print("publish_json: set INTENT_QUEUE_URL and CONTENT_KEY_ARN", file=sys.stderr)
        return 2
    producer = Producer(queue_url, key_id)
    results: list[dict[str, Any]] = []
    failed = 0
    for d in json.load(sys.stdin):
        ident = {"challenge_id": d["challenge_id"], "channel": d["channel"]}
        try:
            r = producer.publish(notification(d))
            results.append({**ident, "dedupe_key": r.dedupe_key, "content_hash": r.content_hash, "message_id": r.message_id, "attempts": r.attempts})
        except ProducerError as err:
            failed += 1
            results.append({**ident, "error": {"name": type(err).__name__, "code": err.code, "field": getattr(err, "field", None),
                                               "reason": getattr(err, "reason", None), "message": str(err)}})
    json.dump(results, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
