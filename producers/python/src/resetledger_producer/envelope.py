"""Sealing: a fresh AES-256 data key from KMS GenerateDataKey for every
message, the canonical plaintext compressed with raw DEFLATE (RFC 1951),
AES-256-GCM over that with the dedupe key as AAD, and only the KMS-encrypted
copy of the data key kept (envelope version 2). With a preset dictionary, the
plaintext is compressed against it and the envelope, version 3, names it
(``dict``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import ProducerError
from .intent import (
    ENVELOPE_VERSION,
    ENVELOPE_VERSION_DICTIONARY,
    MAX_CIPHERTEXT,
    MAX_DICTIONARY,
    MAX_PLAINTEXT,
    Envelope,
    Message,
)

__all__ = [
    "ENCRYPTION_CONTEXT_PURPOSE",
    "DataKey",
    "DataKeyClient",
    "MalformedDataKeyError",
    "aad",
    "canonical_plaintext",
    "check_dictionary",
    "compress",
    "dictionary_id",
    "encryption_context",
    "seal",
    "seal_with",
]

ENCRYPTION_CONTEXT_PURPOSE: Final = "password-reset-notification"
"""The "purpose" entry of the KMS encryption context."""

_NONCE_SIZE: Final = 12
_MAX_EDK: Final = 6144
_MAX_KEY_ID: Final = 2048
_KEY_ID: Final = re.compile(r"[A-Za-z0-9:/_.-]+")
_GO_ESCAPES: Final = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPED: Final = re.compile("[<>&\u2028\u2029]")


def encryption_context(key: str) -> dict[str, str]:
    """The KMS encryption context of a data key for the logical message with
    dedupe key ``key``. The consumer decrypts under the same context."""
    return {"purpose": ENCRYPTION_CONTEXT_PURPOSE, "dedupe_key": key}


def aad(key: str) -> bytes:
    """The GCM additional authenticated data: the ASCII bytes of the hex dedupe key."""
    return key.encode("ascii")


def canonical_plaintext(m: Message) -> bytearray:
    """The canonical plaintext of a message: the UTF-8 bytes of the JSON object
    ``{"to":...,"subject":...,"body":...}`` in that order, ``subject`` left out
    when empty, strings escaped as Go's encoding/json does (JSON's short
    escapes, ``\\u00XX`` for other control characters, and ``<``, ``>``,
    ``&``, U+2028, U+2029 as ``\\u003c``, ``\\u003e``, ``\\u0026``,
    ``\\u2028``, ``\\u2029``). A bytearray, so the caller can zero it."""
    obj = {"to": m.to}
    if m.subject:
        obj["subject"] = m.subject
    obj["body"] = m.body
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return bytearray(_GO_ESCAPED.sub(lambda c: _GO_ESCAPES[c.group(0)], text).encode())


def dictionary_id(dictionary: bytes | bytearray) -> str:
    """The id a version 3 envelope names its preset dictionary by (``dict``):
    the lowercase hex SHA-256 of the dictionary's bytes."""
    return hashlib.sha256(dictionary).hexdigest()


def check_dictionary(dictionary: object) -> bytes:
    """Checks a preset dictionary and returns a copy of it: bytes or a
    bytearray of 1 to MAX_DICTIONARY bytes. Raises TypeError or ValueError
    otherwise."""
    if not isinstance(dictionary, (bytes, bytearray)):
        raise TypeError("resetledger: dictionary must be bytes or a bytearray")
    if not 1 <= len(dictionary) <= MAX_DICTIONARY:
        raise ValueError(f"resetledger: dictionary must be 1 to {MAX_DICTIONARY} bytes, not {len(dictionary)}")
    return bytes(dictionary)


def compress(pt: bytes | bytearray, dictionary: bytes | bytearray | None = None) -> bytes:
    """The raw DEFLATE stream (RFC 1951: no zlib or gzip header) of canonical
    plaintext ``pt``, at level 9, against the preset ``dictionary`` if one is
    given. Another implementation's stream may differ byte for byte; the
    consumer inflates any. Raises ValueError for a plaintext over
    MAX_PLAINTEXT, and TypeError or ValueError for a dictionary
    check_dictionary refuses."""
    if len(pt) > MAX_PLAINTEXT:
        raise ValueError("plaintext too long")
    if dictionary is None:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
    else:
        c = zlib.compressobj(9, zlib.DEFLATED, -15, zdict=check_dictionary(dictionary))
    return c.compress(pt) + c.flush()


@dataclass(frozen=True)
class DataKey:
    """A data key as GenerateDataKey returns it."""

    plaintext: bytes | bytearray = field(repr=False)
    """The 32-byte AES key. Zeroed by seal after use when it is a bytearray."""
    ciphertext_blob: bytes
    """CiphertextBlob: the data key encrypted under the KMS key."""
    key_id: str
    """KeyId: the ARN of the KMS key."""


class MalformedDataKeyError(ProducerError):
    """KMS answered with something that cannot be a data key."""

    def __init__(self, detail: str) -> None:
        super().__init__("ERR_MALFORMED_DATA_KEY", f"resetledger: KMS returned a malformed data key: {detail}")


def seal_with(
    key: str, pt: bytes | bytearray, data_key: DataKey, nonce: bytes, dictionary: bytes | bytearray | None = None
) -> Envelope:
    """Seals plaintext ``pt`` for dedupe key ``key`` with a given data key and
    nonce: compresses it (compress, against ``dictionary`` if given: envelope
    version 3 naming it) and encrypts the stream. seal calls it with a fresh
    data key and a random nonce; the test vectors call it with fixed ones. A
    data key must never seal twice."""
    if dictionary is not None:
        dictionary = check_dictionary(dictionary)
    if len(data_key.plaintext) != 32:
        raise MalformedDataKeyError("want 32 bytes")
    if len(data_key.ciphertext_blob) == 0 or len(data_key.ciphertext_blob) > _MAX_EDK:
        raise MalformedDataKeyError("ciphertext blob missing or too long")
    if len(data_key.key_id) > _MAX_KEY_ID or not _KEY_ID.fullmatch(data_key.key_id):
        raise MalformedDataKeyError("key id missing, too long or with a character outside [A-Za-z0-9:/_.-]")
    if len(nonce) != _NONCE_SIZE:
        raise ValueError("nonce: want 12 bytes")
    ct = AESGCM(data_key.plaintext).encrypt(nonce, compress(pt, dictionary), aad(key))
    if len(ct) > MAX_CIPHERTEXT:
        raise ValueError("ciphertext too long")
    edk, n64, ct64 = _b64(data_key.ciphertext_blob), _b64(nonce), _b64(ct)
    if dictionary is None:
        return Envelope(v=ENVELOPE_VERSION, kms_key_id=data_key.key_id, edk=edk, nonce=n64, ct=ct64)
    return Envelope(
        v=ENVELOPE_VERSION_DICTIONARY, kms_key_id=data_key.key_id, dict_id=dictionary_id(dictionary), edk=edk, nonce=n64, ct=ct64
    )


class DataKeyClient(Protocol):
    """The KMS call seal makes; a boto3 KMS client is one."""

    def generate_data_key(
        self, *, KeyId: str, KeySpec: Literal["AES_256"], EncryptionContext: Mapping[str, str]
    ) -> Mapping[str, object]: ...


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _bytes(v: object) -> bytes | bytearray:
    return v if isinstance(v, (bytes, bytearray)) else b""


def seal(
    kms: DataKeyClient, key_id: str, key: str, m: Message, *, dictionary: bytes | bytearray | None = None
) -> Envelope:
    """Seals message ``m`` for the logical message with dedupe key ``key``
    under a fresh data key of KMS key ``key_id`` (an ARN, key id or alias; the
    envelope records the ARN KMS returns). With ``dictionary`` (a preset
    DEFLATE dictionary of 1 to MAX_DICTIONARY bytes, which the stack must
    hold too) the envelope is version 3 and names it; without, version 2.
    The producer's mutable copies of the plaintext (and the data key, when
    the client hands a bytearray) are zeroed before it returns. Validate the
    message first (validate_message): this function trusts it."""
    if dictionary is not None:
        # Refused before the KMS call: no data key is spent on it.
        dictionary = check_dictionary(dictionary)
    pt = canonical_plaintext(m)
    try:
        out = kms.generate_data_key(KeyId=key_id, KeySpec="AES_256", EncryptionContext=encryption_context(key))
        plain = _bytes(out.get("Plaintext"))
        try:
            returned_id = out.get("KeyId")
            data_key = DataKey(
                plaintext=plain,
                ciphertext_blob=bytes(_bytes(out.get("CiphertextBlob"))),
                key_id=returned_id if isinstance(returned_id, str) and returned_id else key_id,
            )
            return seal_with(key, pt, data_key, os.urandom(_NONCE_SIZE), dictionary)
        finally:
            if isinstance(plain, bytearray):
                plain[:] = bytes(len(plain))
    finally:
        pt[:] = bytes(len(pt))
