#!/usr/bin/env python3
"""Publishes the notifications given as a JSON array on stdin, one after the
other, and prints a JSON array with the outcome of each on stdout: what an
account service's batch job or smoke test would do, and what the repository's
end-to-end test runs against a deployed stack.

    INTENT_QUEUE_URL=... CONTENT_KEY_ARN=... INTENT_KEY_ARN=... python examples/publish_json.py < notifications.json

Each notification is an object with the intent's member names (challenge_id,
channel, workflow {kind, order}, destination_ref, subject_ref (optional),
issued_at (optional: the producer's clock when left out) and expires_at as
RFC 3339, template_id, template_version, policy_version) and message {to,
subject, body}. The messages (addresses, reset links) come on
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

from resetledger_producer import Message, Notification, Producer, ProducerError, Workflow, format_time


def parse_time(name: str, s: str) -> datetime:
    """An RFC 3339 time with any number of fraction digits (Python 3.10's
    fromisoformat takes only 3 or 6; the microseconds are kept)."""
    m = re.fullmatch(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|z|[+-]\d\d:\d\d)", s)
    if m is None:
        raise ValueError(f"{name}: want an RFC 3339 date-time")
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
        issued_at=parse_time("issued_at", d["issued_at"]) if d.get("issued_at") else None,
        expires_at=parse_time("expires_at", d["expires_at"]),
        template_id=d["template_id"],
        template_version=d["template_version"],
        policy_version=d["policy_version"],
        message=Message(to=m["to"], subject=m.get("subject", ""), body=m["body"]),
    )


def main() -> int:
    queue_url, key_id, intent_key_arn = (os.environ.get(v, "") for v in ("INTENT_QUEUE_URL", "CONTENT_KEY_ARN", "INTENT_KEY_ARN"))
    if not queue_url or not key_id or not intent_key_arn:
        print("publish_json: set INTENT_QUEUE_URL, CONTENT_KEY_ARN and INTENT_KEY_ARN", file=sys.stderr)
        return 2
    producer = Producer(queue_url, key_id, intent_key_arn)
    results: list[dict[str, Any]] = []
    failed = 0
    for d in json.load(sys.stdin):
        ident = {"challenge_id": d["challenge_id"], "channel": d["channel"]}
        try:
            r = producer.publish(notification(d))
            results.append({**ident, "dedupe_key": r.dedupe_key, "content_hash": r.content_hash, "issued_at": format_time(r.issued_at),
                            "message_id": r.message_id, "attempts": r.attempts})
        except ProducerError as err:
            failed += 1
            results.append({**ident, "error": {"name": type(err).__name__, "code": err.code, "field": getattr(err, "field", None),
                                               "reason": getattr(err, "reason", None), "message": str(err)}})
    json.dump(results, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
