"""The intent's seal: KMS GenerateMac (HMAC_SHA_256) under the stack's intent
key over the intent's binding (intent_binding), written as intent_mac. The
claim function verifies it (VerifyMac) before any row exists, so an intent
replayed with another expiry, subject, destination, workflow or template is
refused.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Final, Literal, Protocol

from .errors import ProducerError

__all__ = ["MAC_ALGORITHM", "MAX_BINDING", "MacClient", "MalformedMacError", "encode_mac", "sign_intent"]

MAC_ALGORITHM: Final = "HMAC_SHA_256"
"""The MAC algorithm of every seal."""

MAX_BINDING: Final = 4096
"""The longest binding KMS GenerateMac takes, in bytes."""

_MAC_SIZE: Final = 32


class MacClient(Protocol):
    """The KMS call sign_intent makes; a boto3 KMS client is one."""

    def generate_mac(self, *, Message: bytes, KeyId: str, MacAlgorithm: Literal["HMAC_SHA_256"]) -> Mapping[str, object]: ...


class MalformedMacError(ProducerError):
    """KMS answered GenerateMac with something that is not an HMAC-SHA-256."""

    def __init__(self, length: int) -> None:
        super().__init__("ERR_MALFORMED_MAC", f"resetledger: KMS returned a {length}-byte MAC (want {_MAC_SIZE})")


def encode_mac(mac: bytes) -> str:
    """A MAC as intent_mac carries it: base64url without padding (43 characters)."""
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")


def sign_intent(kms: MacClient, key_id: str, binding: bytes) -> str:
    """Asks KMS for the seal of ``binding`` under the intent key ``key_id`` (the
    stack output IntentKeyArn) and returns it as intent_mac."""
    if not 0 < len(binding) <= MAX_BINDING:
        raise ValueError(f"binding of {len(binding)} bytes (want 1 to {MAX_BINDING})")
    out = kms.generate_mac(Message=binding, KeyId=key_id, MacAlgorithm=MAC_ALGORITHM)
    mac = out.get("Mac")
    if not isinstance(mac, (bytes, bytearray)) or len(mac) != _MAC_SIZE:
        raise MalformedMacError(len(mac) if isinstance(mac, (bytes, bytearray)) else 0)
    return encode_mac(bytes(mac))
