"""The package against the cross-language vectors of testdata/vectors, which
the Go tests generate from the Go implementation and check."""

from __future__ import annotations

import base64
import json
import os
import zlib
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from resetledger_producer import (
    DataKey,
    Envelope,
    ExpiredError,
    IntentError,
    Producer,
    PublishResult,
    Validated,
    aad,
    canonical_plaintext,
    content_hash,
    dedupe_key,
    encode_intent,
    encode_mac,
    encryption_context,
    envelope_digest,
    envelope_digest_preimage,
    format_time,
    intent_binding,
    seal_with,
    validate,
)

from .fixtures import FakeKMS, FakeSQS, VECTORS_DIR, data_key, envelope, load_vectors, notification, parse_time, sha256

INTENTS: list[dict[str, Any]] = load_vectors("intents.json")["vectors"]
INVALID: dict[str, Any] = load_vectors("invalid.json")








def test_there_are_vectors() -> None:
    assert len(INTENTS) >= 8
    assert len(INVALID["vectors"]) >= 20


by_name = pytest.mark.parametrize("v", INTENTS, ids=[v["name"] for v in INTENTS])


@by_name
def test_dedupe_key(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    assert sha256(v["dedupe_key_preimage"].encode()) == v["dedupe_key"]
    assert dedupe_key(n.challenge_id, n.channel) == v["dedupe_key"]


@by_name
def test_content_hash(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    assert sha256(bytes.fromhex(v["content_hash_preimage_hex"])) == v["content_hash"]
    assert content_hash(n.template_id, n.template_version, n.message) == v["content_hash"]


def mac_of(v: dict[str, Any]) -> bytes:
    return base64.b64decode(v["generate_mac"]["Mac_base64"])


@by_name
def test_validate_returns_the_key_hash_and_issued_at(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    assert n.issued_at is not None
    assert validate(n, n.expires_at - timedelta(minutes=1)) == Validated(v["dedupe_key"], v["content_hash"], n.issued_at)
    assert format_time(n.issued_at) == json.loads(v["body"])["issued_at"]


@by_name
def test_envelope_digest(v: dict[str, Any]) -> None:
    pre = envelope_digest_preimage(envelope(v["sealed_content"]))
    assert isinstance(pre, bytes)
    assert pre == v["envelope_preimage"].encode()
    assert sha256(pre) == v["envelope"]
    assert envelope_digest(envelope(v["sealed_content"])) == v["envelope"]


@by_name
def test_binding(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    b = intent_binding(n, v["content_hash"], envelope(v["sealed_content"]))
    assert isinstance(b, bytes)
    assert b == v["binding"].encode()


@by_name
def test_intent_mac_is_the_mac_in_base64url_without_padding(v: dict[str, Any]) -> None:
    assert v["generate_mac"]["MacAlgorithm"] == "HMAC_SHA_256"
    assert encode_mac(mac_of(v)) == v["intent_mac"]
    assert len(v["intent_mac"]) == 43 and "=" not in v["intent_mac"]


@by_name
def test_plaintext_aad_encryption_context(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    pt = canonical_plaintext(n.message)
    assert pt.hex() == v["plaintext_hex"]
    assert pt.decode() == v["plaintext"]
    assert aad(v["dedupe_key"]).hex() == v["aad_hex"]
    assert encryption_context(v["dedupe_key"]) == v["encryption_context"]


@by_name
def test_envelope_with_the_fixed_data_key_and_nonce(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    dk = data_key(v)
    env = seal_with(v["dedupe_key"], canonical_plaintext(n.message), dk, bytes.fromhex(v["nonce_hex"]))
    # Every member but ct is the vector's byte for byte; ct differs where
    # zlib's DEFLATE stream differs from Go's (docs/intent-v2.md).
    assert {**env.to_dict(), "ct": ""} == {**v["sealed_content"], "ct": ""}
    assert env.v == 2
    assert list(env.to_dict()) == list(v["sealed_content"]), "members in the documented order"
    # Ours opens, with the cryptography package and zlib alone, to the plaintext;
    # so does the Go producer's (the vector's), whose stream is deflate_hex.
    assert _open(dk.plaintext, v["dedupe_key"], env.to_dict()) == v["plaintext"]
    assert _open(dk.plaintext, v["dedupe_key"], v["sealed_content"]) == v["plaintext"]
    assert zlib.decompress(bytes.fromhex(v["deflate_hex"]), -15).decode() == v["plaintext"]


def _open(data_key: bytes | bytearray, dedupe_key: str, e: dict[str, Any]) -> str:
    """Opens envelope e (version 2) as the consumer does: AES-256-GCM under
    the dedupe key as AAD, then raw inflate, refusing trailing bytes."""
    z = AESGCM(data_key).decrypt(base64.b64decode(e["nonce"]), base64.b64decode(e["ct"]), dedupe_key.encode("ascii"))
    d = zlib.decompressobj(-15)
    pt = d.decompress(z)
    assert d.eof and not d.unused_data
    return pt.decode()


@by_name
def test_intent_body(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    assert encode_intent(n, v["content_hash"], envelope(v["sealed_content"]), v["intent_mac"]) == v["body"]
    has_subject = "subject_ref" in v["notification"]
    assert ('"subject_ref":' in v["body"]) == has_subject


@by_name
def test_publish_one_data_key_one_mac_over_the_binding_the_same_body_up_to_the_random_nonce(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    assert n.issued_at is not None
    dk = data_key(v)
    kms = FakeKMS(bytes(dk.plaintext), dk.ciphertext_blob, dk.key_id, mac=mac_of(v), mac_key_id=v["generate_mac"]["KeyId"])
    sqs = FakeSQS()
    p = Producer(
        "https://sqs.test/intents", "alias/reset-content", "alias/reset-intent", kms=kms, sqs=sqs, clock=lambda: n.expires_at - timedelta(minutes=1)
    )
    res = p.publish(n)
    assert res == PublishResult(
        dedupe_key=v["dedupe_key"], content_hash=v["content_hash"], issued_at=n.issued_at, message_id="msg-1", attempts=1
    )
    assert kms.inputs == [{"KeyId": "alias/reset-content", "KeySpec": "AES_256", "EncryptionContext": v["encryption_context"]}]
    assert sqs.queue_urls == ["https://sqs.test/intents"]
    sent = json.loads(sqs.bodies[0])["sealed_content"]
    # The MAC is over the binding of the envelope sent: the vector's binding
    # but for its last line, the digest of this envelope.
    binding = intent_binding(n, v["content_hash"], envelope(sent))
    assert kms.mac_inputs == [{"KeyId": "alias/reset-intent", "MacAlgorithm": v["generate_mac"]["MacAlgorithm"], "Message": binding}]
    digest = envelope_digest(envelope(sent))
    assert digest != v["envelope"]
    assert binding == v["binding"].replace(f"envelope:64:{v['envelope']}\n", f"envelope:64:{digest}\n").encode()
    assert sent["nonce"] != v["sealed_content"]["nonce"], "the nonce is random"
    resealed = seal_with(v["dedupe_key"], canonical_plaintext(n.message), dk, base64.b64decode(sent["nonce"]))
    assert sent == resealed.to_dict()
    # Byte for byte the vector's body, but for the sealed content's random nonce (and so its ciphertext).
    as_sent = json.dumps(resealed.to_dict(), separators=(",", ":"))
    assert as_sent in sqs.bodies[0]
    assert sqs.bodies[0].replace(as_sent, json.dumps(v["sealed_content"], separators=(",", ":"))) == v["body"]
    assert all(b == 0 for k in kms.handed for b in k), "the data key the client handed over is zeroed"


@pytest.mark.parametrize("v", INVALID["vectors"], ids=[v["name"] for v in INVALID["vectors"]])
def test_invalid(v: dict[str, Any]) -> None:
    now = parse_time(INVALID["now"])
    kms = FakeKMS(bytes(32), b"\x01", "k")
    sqs = FakeSQS()
    p = Producer("https://sqs.test/intents", "k", "i", kms=kms, sqs=sqs, clock=lambda: now)
    n = notification(v["notification"])
    want = v["want"]
    if want["error"] == "expired":
        with pytest.raises(ExpiredError) as expired:
            p.publish(n)
        assert expired.value.code == "ERR_CHALLENGE_EXPIRED"
    else:
        with pytest.raises(IntentError) as invalid:
            p.publish(n)
        assert invalid.value.code == "ERR_INVALID_INTENT"
        assert (invalid.value.field, invalid.value.reason) == (want["field"], want["reason"])
    assert kms.calls + len(sqs.bodies) == 0, "no AWS call (GenerateDataKey, GenerateMac, SendMessage) before a refusal"
    with pytest.raises((IntentError, ExpiredError)):
        p.validate(n)


def test_foreign_python_json_is_what_this_producer_seals() -> None:
    """foreign/python.json: this producer's envelope for every vector of
    intents.json, sealed with the vector's data key and nonce. The Go tests
    open each with the Go opener (docs/intent-v2.md §1.10); here the file must
    be what this producer writes today (VECTORS_UPDATE=1 rewrites it)."""
    sealed = [
        {
            "name": v["name"],
            "sealed_content": seal_with(
                v["dedupe_key"], canonical_plaintext(notification(v["notification"]).message), data_key(v), bytes.fromhex(v["nonce_hex"])
            ).to_dict(),
        }
        for v in INTENTS
    ]
    path = VECTORS_DIR / "foreign" / "python.json"
    if os.environ.get("VECTORS_UPDATE") == "1":
        path.parent.mkdir(exist_ok=True)
        doc = {"producer": "python", "zlib": zlib.ZLIB_RUNTIME_VERSION, "vectors": sealed}
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    # Byte for byte only with the zlib that wrote the file: another zlib may
    # write another, equally valid, stream.
    file = load_vectors("foreign/python.json")
    if file["zlib"] == zlib.ZLIB_RUNTIME_VERSION:
        assert file["vectors"] == sealed
