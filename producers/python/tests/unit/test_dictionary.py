"""Envelope version 3, a preset DEFLATE dictionary: the package against
testdata/vectors/dictionary.json (which the Go tests generate and check), and
the dictionary option's checks."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from resetledger_producer import (
    MAX_BODY_SIZE,
    MAX_DICTIONARY,
    DataKey,
    Envelope,
    IntentError,
    Message,
    Notification,
    Producer,
    PublishResult,
    Workflow,
    aad,
    canonical_plaintext,
    content_hash,
    dedupe_key,
    dictionary_id,
    encode_intent,
    encryption_context,
    envelope_digest,
    envelope_digest_preimage,
    intent_binding,
    seal,
    seal_with,
    validate,
)
from resetledger_producer.envelope import compress

from .fixtures import FakeKMS, FakeSQS, data_key, envelope, load_vectors, notification, sha256

DOC: dict[str, Any] = load_vectors("dictionary.json")
VECTORS: list[dict[str, Any]] = DOC["vectors"]
DICTIONARY: bytes = DOC["dictionary"].encode()








def _open(data_key: bytes | bytearray, key: str, e: dict[str, Any], dictionary: bytes | None) -> str:
    """Opens envelope e as the consumer does: AES-256-GCM under the dedupe key
    as AAD, then raw inflate (against the dictionary, if given), refusing
    trailing bytes."""
    z = AESGCM(data_key).decrypt(base64.b64decode(e["nonce"]), base64.b64decode(e["ct"]), key.encode("ascii"))
    d = zlib.decompressobj(-15) if dictionary is None else zlib.decompressobj(-15, zdict=dictionary)
    pt = d.decompress(z)
    assert d.eof and not d.unused_data
    return pt.decode()


def test_there_are_vectors_and_the_dictionary_its_id_names() -> None:
    assert len(VECTORS) >= 4
    assert sha256(DICTIONARY) == DOC["dictionary_id"]
    assert dictionary_id(DICTIONARY) == DOC["dictionary_id"]
    assert 1 <= len(DICTIONARY) <= MAX_DICTIONARY


by_name = pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])


@by_name
def test_the_vector_is_version_3_naming_the_dictionary(v: dict[str, Any]) -> None:
    assert v["sealed_content"]["v"] == 3
    assert v["sealed_content"]["dict"] == DOC["dictionary_id"]
    assert list(v["sealed_content"]) == ["v", "alg", "kms_key_id", "dict", "edk", "nonce", "ct"]
    assert list(envelope(v["sealed_content"]).to_dict()) == list(v["sealed_content"])


@by_name
def test_key_hash_plaintext_aad_encryption_context(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    assert dedupe_key(n.challenge_id, n.channel) == v["dedupe_key"]
    assert content_hash(n.template_id, n.template_version, n.message) == v["content_hash"]
    pt = canonical_plaintext(n.message)
    assert pt.hex() == v["plaintext_hex"]
    assert pt.decode() == v["plaintext"]
    assert aad(v["dedupe_key"]).hex() == v["aad_hex"]
    assert encryption_context(v["dedupe_key"]) == v["encryption_context"]


@by_name
def test_envelope_digest_preimage_carries_dict(v: dict[str, Any]) -> None:
    e = envelope(v["sealed_content"])
    pre = envelope_digest_preimage(e)
    assert pre == v["envelope_preimage"].encode()
    assert f"\nkms_key_id:{len(e.kms_key_id)}:{e.kms_key_id}\ndict:64:{DOC['dictionary_id']}\nedk:".encode() in pre
    assert sha256(pre) == v["envelope"]
    assert envelope_digest(e) == v["envelope"]


@by_name
def test_binding(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    assert intent_binding(n, v["content_hash"], envelope(v["sealed_content"])) == v["binding"].encode()


@by_name
def test_intent_body(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    assert encode_intent(n, v["content_hash"], envelope(v["sealed_content"]), v["intent_mac"]) == v["body"]


@by_name
def test_envelope_with_the_fixed_data_key_and_nonce_against_the_dictionary(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    dk = data_key(v)
    env = seal_with(v["dedupe_key"], canonical_plaintext(n.message), dk, bytes.fromhex(v["nonce_hex"]), DICTIONARY)
    # Every member but ct is the vector's byte for byte, in the same order; ct
    # differs where zlib's DEFLATE stream differs from Go's.
    assert list(env.to_dict()) == list(v["sealed_content"])
    assert {**env.to_dict(), "ct": ""} == {**v["sealed_content"], "ct": ""}
    assert env.v == 3 and env.dict_id == DOC["dictionary_id"]
    # Ours opens, with the cryptography package and zlib alone, to the
    # plaintext; so does the Go producer's (the vector's), whose stream is deflate_hex.
    assert _open(dk.plaintext, v["dedupe_key"], env.to_dict(), DICTIONARY) == v["plaintext"]
    assert _open(dk.plaintext, v["dedupe_key"], v["sealed_content"], DICTIONARY) == v["plaintext"]
    d = zlib.decompressobj(-15, zdict=DICTIONARY)
    assert d.decompress(bytes.fromhex(v["deflate_hex"])).decode() == v["plaintext"]
    assert d.eof and not d.unused_data
    # Where zlib writes Go's very stream, the ciphertext is Go's too.
    if compress(canonical_plaintext(n.message), DICTIONARY).hex() == v["deflate_hex"]:
        assert env.ct == v["sealed_content"]["ct"]


@by_name
def test_publish_with_the_dictionary(v: dict[str, Any]) -> None:
    n = notification(v["notification"])
    assert n.issued_at is not None
    dk = data_key(v)
    kms = FakeKMS(bytes(dk.plaintext), dk.ciphertext_blob, dk.key_id, mac=base64.b64decode(v["generate_mac"]["Mac_base64"]))
    sqs = FakeSQS()
    p = Producer(
        "https://sqs.test/intents",
        "alias/reset-content",
        "alias/reset-intent",
        kms=kms,
        sqs=sqs,
        clock=lambda: n.expires_at - timedelta(minutes=1),
        dictionary=DICTIONARY,
    )
    res = p.publish(n)
    assert res == PublishResult(
        dedupe_key=v["dedupe_key"], content_hash=v["content_hash"], issued_at=n.issued_at, message_id="msg-1", attempts=1
    )
    assert kms.inputs == [{"KeyId": "alias/reset-content", "KeySpec": "AES_256", "EncryptionContext": v["encryption_context"]}]
    sent = json.loads(sqs.bodies[0])["sealed_content"]
    assert sent["v"] == 3 and sent["dict"] == DOC["dictionary_id"]
    binding = intent_binding(n, v["content_hash"], envelope(sent))
    assert kms.mac_inputs == [{"KeyId": "alias/reset-intent", "MacAlgorithm": v["generate_mac"]["MacAlgorithm"], "Message": binding}]
    digest = envelope_digest(envelope(sent))
    assert binding == v["binding"].replace(f"envelope:64:{v['envelope']}\n", f"envelope:64:{digest}\n").encode()
    assert sent["nonce"] != v["sealed_content"]["nonce"], "the nonce is random"
    resealed = seal_with(v["dedupe_key"], canonical_plaintext(n.message), dk, base64.b64decode(sent["nonce"]), DICTIONARY)
    assert sent == resealed.to_dict()
    assert _open(dk.plaintext, v["dedupe_key"], sent, DICTIONARY) == v["plaintext"]
    # Byte for byte the vector's body, but for the sealed content's random nonce (and so its ciphertext).
    as_sent = json.dumps(resealed.to_dict(), separators=(",", ":"))
    assert as_sent in sqs.bodies[0]
    assert sqs.bodies[0].replace(as_sent, json.dumps(v["sealed_content"], separators=(",", ":"))) == v["body"]


V0 = VECTORS[0]
N0 = notification(V0["notification"])
KEY = (bytes([7]) * 32, b"\x01\x02\x03", "arn:aws:kms:us-east-1:111122223333:key/k")


def _producer(kms: FakeKMS, sqs: FakeSQS, **kw: Any) -> Producer:
    return Producer("https://sqs.test/intents", "alias/reset-content", "alias/reset-intent", kms=kms, sqs=sqs, **kw)


@pytest.mark.parametrize("bad", [b"", bytearray(), b"a" * (MAX_DICTIONARY + 1)], ids=["empty", "empty bytearray", "32769 bytes"])
def test_a_bad_dictionary_is_refused_at_construction_and_by_seal(bad: bytes) -> None:
    with pytest.raises(ValueError, match="dictionary must be 1 to 32768 bytes"):
        _producer(FakeKMS(*KEY), FakeSQS(), dictionary=bad)
    kms = FakeKMS(*KEY)
    with pytest.raises(ValueError):
        seal(kms, "k", V0["dedupe_key"], N0.message, dictionary=bad)
    with pytest.raises(ValueError):
        seal_with(V0["dedupe_key"], canonical_plaintext(N0.message), DataKey(*KEY), bytes(12), bad)
    with pytest.raises(ValueError):
        validate(N0, N0.expires_at - timedelta(minutes=1), dictionary=bad)
    assert kms.calls == 0


def test_a_dictionary_that_is_not_bytes_is_refused() -> None:
    for bad in ("template text", [1, 2, 3], memoryview(b"abc")):
        with pytest.raises(TypeError):
            _producer(FakeKMS(*KEY), FakeSQS(), dictionary=bad)


def test_the_longest_and_shortest_dictionaries_are_accepted() -> None:
    _producer(FakeKMS(*KEY), FakeSQS(), dictionary=b"a" * MAX_DICTIONARY)
    _producer(FakeKMS(*KEY), FakeSQS(), dictionary=b"{")


def test_without_a_dictionary_the_envelope_is_version_2_with_no_dict() -> None:
    sqs = FakeSQS()
    _producer(FakeKMS(*KEY), sqs, clock=lambda: N0.expires_at - timedelta(minutes=1)).publish(N0)
    sent = json.loads(sqs.bodies[0])["sealed_content"]
    assert sent["v"] == 2
    assert list(sent) == ["v", "alg", "kms_key_id", "edk", "nonce", "ct"]
    assert b"\ndict:" not in envelope_digest_preimage(envelope(sent))
    assert _open(KEY[0], V0["dedupe_key"], sent, None) == V0["plaintext"]
    sealed = seal(FakeKMS(*KEY), "k", V0["dedupe_key"], N0.message)
    assert sealed.v == 2 and sealed.dict_id is None and "dict" not in sealed.to_dict()


def test_the_dictionary_is_copied() -> None:
    mine = bytearray(DICTIONARY)
    sqs = FakeSQS()
    p = _producer(FakeKMS(*KEY), sqs, clock=lambda: N0.expires_at - timedelta(minutes=1), dictionary=mine)
    mine[:] = bytes(len(mine))
    p.publish(N0)
    sent = json.loads(sqs.bodies[0])["sealed_content"]
    assert sent["dict"] == DOC["dictionary_id"]
    assert _open(KEY[0], V0["dedupe_key"], sent, DICTIONARY) == V0["plaintext"]


def test_the_size_check_compresses_with_the_dictionary_and_counts_dict() -> None:
    """A body that barely compresses (base64 of pseudo-random bytes), cut to
    the longest validate admits with the dictionary: published with the
    smallest data key and key id, its intent fits the queue exactly as the
    check computed, dict included. A check that left dict out would admit
    longer bodies, which then fail after KMS answered."""
    now = datetime(2026, 11, 30, 10, 42, tzinfo=timezone.utc)
    base = Notification(
        challenge_id="chal-7f3a9c01",
        channel="email",
        workflow=Workflow("single"),
        destination_ref="acct-1001:email",
        issued_at=datetime(2026, 11, 30, 10, 41, tzinfo=timezone.utc),
        expires_at=datetime(2026, 11, 30, 10, 50, tzinfo=timezone.utc),
        template_id="reset-email",
        template_version="3",
        policy_version="policy-1",
        message=Message(to="player1001@example.com", subject="Reset your password", body="x"),
    )
    noise = b"".join(hashlib.sha256(f"noise-{i}".encode()).digest() for i in range(60_000 // 32 + 1))
    text = base64.b64encode(noise).decode()

    def with_body(length: int) -> Notification:
        return replace(base, message=replace(base.message, body=text[:length]))

    def fits(length: int, dictionary: bytes | None) -> bool:
        try:
            validate(with_body(length), now, dictionary=dictionary)
            return True
        except IntentError as err:
            assert err.field == "message"
            return False

    def longest(dictionary: bytes | None) -> int:
        lo, hi = 1000, len(text)
        assert fits(lo, dictionary) and not fits(hi, dictionary)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid, dictionary) else (lo, mid)
        return lo

    with_dict, without = longest(DICTIONARY), longest(None)
    assert with_dict < without, (with_dict, without)
    sqs = FakeSQS()
    p = _producer(FakeKMS(bytes([7]) * 32, b"\x01", "k"), sqs, clock=lambda: now, dictionary=DICTIONARY)
    p.publish(with_body(with_dict))
    size = len(sqs.bodies[0].encode())
    assert MAX_BODY_SIZE - 64 < size <= MAX_BODY_SIZE, size
    with pytest.raises(IntentError):
        p.validate(with_body(with_dict + 1))
