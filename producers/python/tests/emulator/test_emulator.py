"""The producer against an AWS emulator (KMS and SQS): what it sends is an
intent whose sealed content KMS opens under the documented encryption
context, and whose intent_mac KMS VerifyMac accepts over the binding
recomputed from the received body, and refuses once a field changed. Needs AWS_ENDPOINT_URL (or ministack on 127.0.0.1:$MINISTACK_PORT,
default 4566); skipped without one unless LEDGER_REQUIRE_EMULATOR=1 or CI."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import secrets
import time
import urllib.request
import zlib
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from resetledger_producer import (
    Channel,
    Envelope,
    Message,
    Notification,
    Producer,
    PublishError,
    Workflow,
    canonical_plaintext,
    content_hash,
    dedupe_key,
    encryption_context,
    intent_binding,
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
    intent_key_arn = kms.create_key(Description=f"{RUN} intent key", KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC")["KeyMetadata"]["Arn"]
    queue_url = sqs.create_queue(QueueName=RUN)["QueueUrl"]
    yield {"kms": kms, "sqs": sqs, "key_arn": key_arn, "intent_key_arn": intent_key_arn, "queue_url": queue_url}
    try:
        sqs.delete_queue(QueueUrl=queue_url)
        kms.schedule_key_deletion(KeyId=key_arn, PendingWindowInDays=7)
        kms.schedule_key_deletion(KeyId=intent_key_arn, PendingWindowInDays=7)
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


def binding_of(w: dict[str, Any]) -> bytes:
    """The binding of a received intent body, recomputed from its members as the
    claim function does (docs/intent-v2.md), not with the package."""
    wf = w["workflow"]
    values = [
        ("schema_version", str(w["schema_version"])),
        ("purpose", w["purpose"]),
        ("challenge_id", w["challenge_id"]),
        ("channel", w["channel"]),
        ("dedupe_key", dedupe_key(w["challenge_id"], w["channel"])),
        ("workflow.kind", wf["kind"]),
        ("workflow.order", ",".join(wf.get("order", []))),
        ("destination_ref", w["destination_ref"]),
        ("subject_ref", w.get("subject_ref", "")),
        ("issued_at", w["issued_at"]),
        ("expires_at", w["expires_at"]),
        ("template_id", w["template_id"]),
        ("template_version", w["template_version"]),
        ("policy_version", w["policy_version"]),
        ("content_hash", w["content_hash"]),
        ("envelope", envelope_digest_of(w["sealed_content"])),
    ]
    return b"resetledger-intent-binding/v3\n" + b"".join(f"{k}:{len(v.encode())}:{v}\n".encode() for k, v in values)


def envelope_digest_of(e: dict[str, Any]) -> str:
    """The envelope's digest (docs/intent-v2.md §1.6), recomputed from the
    body's members, not with the package."""
    members = ("v", "alg", "kms_key_id", "edk", "nonce", "ct")
    lines = "".join(f"{k}:{len(str(e[k]).encode())}:{e[k]}\n" for k in members)
    return hashlib.sha256(f"resetledger-intent-envelope/v1\n{lines}".encode()).hexdigest()


def verifies(aws: dict[str, Any], binding: bytes, mac: str) -> bool:
    """Whether KMS accepts mac (intent_mac, base64url) over binding under the intent key."""
    try:
        out = aws["kms"].verify_mac(
            KeyId=aws["intent_key_arn"], MacAlgorithm="HMAC_SHA_256", Message=binding, Mac=base64.urlsafe_b64decode(mac + "=")
        )
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "KMSInvalidMacException":
            return False
        raise
    return bool(out["MacValid"])


def receive_all(aws: dict[str, Any], want: int, wait: float = 15.0) -> list[str]:
    bodies: list[str] = []
    deadline = time.monotonic() + wait
    while len(bodies) < want and time.monotonic() < deadline:
        out = aws["sqs"].receive_message(QueueUrl=aws["queue_url"], MaxNumberOfMessages=10, WaitTimeSeconds=1)
        bodies.extend(m["Body"] for m in out.get("Messages", []))
    return bodies


def test_publishes_intents_whose_content_kms_and_aes_gcm_open_under_the_dedupe_key(aws: dict[str, Any]) -> None:
    producer = Producer(aws["queue_url"], aws["key_arn"], aws["intent_key_arn"])
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

        # The seal: KMS accepts it over the binding recomputed from the body
        # (the package's own binding is the same bytes), and refuses it once any
        # field the claim decides on changed.
        binding = binding_of(intent)
        assert binding == intent_binding(dataclasses.replace(n, issued_at=res.issued_at), res.content_hash, Envelope(**intent["sealed_content"]))
        assert verifies(aws, binding, intent["intent_mac"]), "intent_mac does not verify under the intent key"
        tampered: list[dict[str, Any]] = [
            {"expires_at": "2099-01-01T00:00:00Z"},
            {"issued_at": "2099-01-01T00:00:00Z"},
            {"subject_ref": "acct-8"},
            {"destination_ref": "acct-8:email"},
            {"workflow": {"kind": "dual"}},
            {"template_version": "2"},
            {"sealed_content": {**intent["sealed_content"], "nonce": "AAAAAAAAAAAAAAAA"}},
        ]
        for edit in tampered:
            assert not verifies(aws, binding_of({**intent, **edit}), intent["intent_mac"]), f"a changed {next(iter(edit))} still verifies"
        env = intent["sealed_content"]
        assert env["kms_key_id"] == aws["key_arn"], "kms_key_id is the KeyId GenerateDataKey returned"

        dk = aws["kms"].decrypt(CiphertextBlob=base64.b64decode(env["edk"]), KeyId=aws["key_arn"], EncryptionContext=encryption_context(key))
        z = AESGCM(dk["Plaintext"]).decrypt(base64.b64decode(env["nonce"]), base64.b64decode(env["ct"]), key.encode("ascii"))
        # Envelope version 2: the GCM plaintext is the raw DEFLATE stream of the canonical plaintext.
        assert env["v"] == 2
        assert zlib.decompress(z, -15) == canonical_plaintext(n.message)
        # Under another dedupe key's context the data key does not open.
        with pytest.raises(Exception, match="InvalidCiphertext|AccessDenied|Invalid"):
            aws["kms"].decrypt(
                CiphertextBlob=base64.b64decode(env["edk"]), KeyId=aws["key_arn"], EncryptionContext=encryption_context("0" * 64)
            )


def test_a_kms_failure_sends_nothing(aws: dict[str, Any]) -> None:
    producer = Producer(aws["queue_url"], "arn:aws:kms:us-east-1:000000000000:key/00000000-0000-0000-0000-000000000000", aws["intent_key_arn"])
    with pytest.raises(PublishError) as info:
        producer.publish(notification(f"{RUN}-3", "email", Workflow("single")))
    assert (info.value.stage, info.value.attempts) == ("seal", 0)
    assert receive_all(aws, 1, wait=3.0) == []


def test_a_generate_mac_failure_sends_nothing(aws: dict[str, Any]) -> None:
    producer = Producer(aws["queue_url"], aws["key_arn"], "arn:aws:kms:us-east-1:000000000000:key/00000000-0000-0000-0000-000000000000")
    with pytest.raises(PublishError) as info:
        producer.publish(notification(f"{RUN}-5", "email", Workflow("single")))
    assert (info.value.stage, info.value.attempts) == ("sign", 0)
    assert receive_all(aws, 1, wait=3.0) == []


def test_a_missing_queue_is_a_send_failure_not_retried(aws: dict[str, Any]) -> None:
    producer = Producer(aws["queue_url"] + "-missing", aws["key_arn"], aws["intent_key_arn"])
    with pytest.raises(PublishError) as info:
        producer.publish(notification(f"{RUN}-4", "sms", Workflow("single")))
    assert (info.value.stage, info.value.attempts) == ("send", 1)
