"""The producer against an AWS emulator (KMS and SQS): what it sends is an
intent whose sealed content KMS opens under the documented encryption
context. Needs AWS_ENDPOINT_URL (or ministack on 127.0.0.1:$MINISTACK_PORT,
default 4566); skipped without one unless LEDGER_REQUIRE_EMULATOR=1 or CI."""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from resetledger_producer import (
    Channel,
    Message,
    Notification,
    Producer,
    PublishError,
    Workflow,
    canonical_plaintext,
    content_hash,
    dedupe_key,
    encryption_context,
)

REQUIRED = os.environ.get("LEDGER_REQUIRE_EMULATOR") == "1" or "CI" in os.environ
ENDPOINT = os.environ.get("AWS_ENDPOINT_URL") or f"http://127.0.0.1:{os.environ.get('MINISTACK_PORT', '4566')}"


def reachable() -> bool:
    try:
        with urllib.request.urlopen(ENDPOINT.rstrip("/") + "/_ministack/health", timeout=2) as r:
            return int(r.status) < 500
    except urllib.error.HTTPError as e:
        return e.code < 500 or "AWS_ENDPOINT_URL" in os.environ
    except OSError:
        return False


UP = reachable()
if not UP and REQUIRED:
    raise RuntimeError(f"no AWS emulator at {ENDPOINT} (LEDGER_REQUIRE_EMULATOR=1 or CI): start one with localstack/ministack.sh start")

pytestmark = pytest.mark.skipif(not UP, reason=f"no AWS emulator at {ENDPOINT}")


@pytest.fixture(scope="module", autouse=True)
def environment() -> Iterator[None]:
    """The clients the producer makes read the same environment an account service's would."""
    saved = dict(os.environ)
    os.environ["AWS_ENDPOINT_URL"] = ENDPOINT
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION", "us-east-1"))
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    yield
    os.environ.clear()
    os.environ.update(saved)


RUN = f"python-producer-{secrets.token_hex(4)}"


@pytest.fixture(scope="module")
def aws(environment: None) -> Iterator[dict[str, Any]]:
    kms = boto3.client("kms")
    sqs = boto3.client("sqs")
    key_arn = kms.create_key(Description=f"{RUN} content key")["KeyMetadata"]["Arn"]
    queue_url = sqs.create_queue(QueueName=RUN)["QueueUrl"]
    yield {"kms": kms, "sqs": sqs, "key_arn": key_arn, "queue_url": queue_url}
    try:
        sqs.delete_queue(QueueUrl=queue_url)
        kms.schedule_key_deletion(KeyId=key_arn, PendingWindowInDays=7)
    except Exception:  # noqa: BLE001 (best-effort cleanup of a throwaway emulator)
        pass


def notification(challenge_id: str, channel: Channel, workflow: Workflow, subject_ref: str | None = None) -> Notification:
    token = secrets.token_hex(16)
    message = (
        Message(to="player7@example.com", subject="Reset your password", body=f"Reset: https://game.example.com/r?token={token}")
        if channel == "email"
        else Message(to="+15555550107", body=f"Reset: https://game.example.com/r/{token}")
    )
    return Notification(
        challenge_id=challenge_id,
        channel=channel,
        workflow=workflow,
        destination_ref=f"acct-7:{channel}",
        subject_ref=subject_ref,
        expires_at=datetime.now(timezone.utc) + timedelta(minutes=10),
        template_id=f"reset-{channel}",
        template_version="1",
        policy_version="policy-1",
        message=message,
    )


def receive_all(aws: dict[str, Any], want: int, wait: float = 15.0) -> list[str]:
    bodies: list[str] = []
    deadline = time.monotonic() + wait
    while len(bodies) < want and time.monotonic() < deadline:
        out = aws["sqs"].receive_message(QueueUrl=aws["queue_url"], MaxNumberOfMessages=10, WaitTimeSeconds=1)
        bodies.extend(m["Body"] for m in out.get("Messages", []))
    return bodies


def test_publishes_intents_whose_content_kms_and_aes_gcm_open_under_the_dedupe_key(aws: dict[str, Any]) -> None:
    producer = Producer(aws["queue_url"], aws["key_arn"])
    fallback = Workflow("fallback", ("email", "sms"))
    notifications = [
        notification(f"{RUN}-1", "email", Workflow("single")),
        notification(f"{RUN}-2", "email", fallback, subject_ref="acct-7"),
        notification(f"{RUN}-2", "sms", fallback, subject_ref="acct-7"),
    ]
    results = [producer.publish(n) for n in notifications]
    bodies = receive_all(aws, len(notifications))
    assert len(bodies) == len(notifications)

    for n, res in zip(notifications, results):
        key = dedupe_key(n.challenge_id, n.channel)
        assert res.dedupe_key == key and res.message_id and res.attempts == 1
        matching = [b for b in bodies if (json.loads(b)["challenge_id"], json.loads(b)["channel"]) == (n.challenge_id, n.channel)]
        assert len(matching) == 1, f"no single message for {n.challenge_id}/{n.channel}"
        body = matching[0]
        for secret in (n.message.to, n.message.body):
            assert secret not in body, "the body holds the address or the link in clear"
        intent = json.loads(body)
        assert intent["content_hash"] == content_hash(n.template_id, n.template_version, n.message) == res.content_hash
        assert intent["workflow"] == ({"kind": "single"} if n.workflow.kind == "single" else {"kind": "fallback", "order": ["email", "sms"]})
        assert intent.get("subject_ref") == n.subject_ref
        env = intent["sealed_content"]
        assert env["kms_key_id"] == aws["key_arn"], "kms_key_id is the KeyId GenerateDataKey returned"

        dk = aws["kms"].decrypt(CiphertextBlob=base64.b64decode(env["edk"]), KeyId=aws["key_arn"], EncryptionContext=encryption_context(key))
        pt = AESGCM(dk["Plaintext"]).decrypt(base64.b64decode(env["nonce"]), base64.b64decode(env["ct"]), key.encode("ascii"))
        assert pt == canonical_plaintext(n.message)
        # Under another dedupe key's context the data key does not open.
        with pytest.raises(Exception, match="InvalidCiphertext|AccessDenied|Invalid"):
            aws["kms"].decrypt(
                CiphertextBlob=base64.b64decode(env["edk"]), KeyId=aws["key_arn"], EncryptionContext=encryption_context("0" * 64)
            )


def test_a_kms_failure_sends_nothing(aws: dict[str, Any]) -> None:
    producer = Producer(aws["queue_url"], "arn:aws:kms:us-east-1:000000000000:key/00000000-0000-0000-0000-000000000000")
    with pytest.raises(PublishError) as info:
        producer.publish(notification(f"{RUN}-3", "email", Workflow("single")))
    assert (info.value.stage, info.value.attempts) == ("seal", 0)
    assert receive_all(aws, 1, wait=3.0) == []


def test_a_missing_queue_is_a_send_failure_not_retried(aws: dict[str, Any]) -> None:
    producer = Producer(aws["queue_url"] + "-missing", aws["key_arn"])
    with pytest.raises(PublishError) as info:
        producer.publish(notification(f"{RUN}-4", "sms", Workflow("single")))
    assert (info.value.stage, info.value.attempts) == ("send", 1)
