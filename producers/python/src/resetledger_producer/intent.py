"""The intent: its fields and their rules, the dedupe key, the content hash,
the envelope's digest, the binding the intent key seals and the wire encoding
(version 3).

docs/intent-v2.md and schema/intent-v3.schema.json in the resetledger
repository are the specification; testdata/vectors holds the vectors this
module is tested against.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Final, Literal

from .errors import IntentError

__all__ = [
    "BINDING_DOMAIN",
    "CHANNELS",
    "ENVELOPE_DIGEST_DOMAIN",
    "ENVELOPE_VERSION",
    "ENVELOPE_VERSION_DICTIONARY",
    "INTENT_MAC_LENGTH",
    "MAX_BODY_SIZE",
    "MAX_CIPHERTEXT",
    "MAX_DICTIONARY",
    "MAX_PLAINTEXT",
    "PURPOSE",
    "SCHEMA_VERSION",
    "Channel",
    "Envelope",
    "Message",
    "Notification",
    "Workflow",
    "WorkflowKind",
    "content_hash",
    "dedupe_key",
    "encode_intent",
    "envelope_digest",
    "envelope_digest_preimage",
    "format_time",
    "intent_binding",
    "issued_at_of",
    "validate_intent_fields",
    "validate_message",
]

Channel = Literal["email", "sms"]
"""The channels an intent can name."""

CHANNELS: Final[tuple[Channel, ...]] = ("email", "sms")

WorkflowKind = Literal["single", "dual", "fallback"]
"""How the channels of one challenge relate: ``single`` (this channel only),
``dual`` (independent claims per channel, both sent) or ``fallback`` (the next
channel of ``order`` is sent only after the previous one was rejected)."""

PURPOSE: Final = "password-reset"
"""The only purpose."""

SCHEMA_VERSION: Final = 3
"""The schema_version this package writes: 3, every decision field and the envelope sealed by intent_mac."""

MAX_BODY_SIZE: Final = 64 * 1024
"""The largest intent body the consumer accepts, in bytes (64 KiB)."""

MAX_CIPHERTEXT: Final = 64 * 1024

MAX_PLAINTEXT: Final = MAX_CIPHERTEXT - 16
"""The largest canonical plaintext (before compression) a message may have,
in bytes: the consumer stops inflating past it."""
"""The largest envelope ciphertext (ct) the consumer accepts, in bytes."""

INTENT_MAC_LENGTH: Final = 43
"""The length of every intent_mac: 32 bytes in base64url without padding."""

BINDING_DOMAIN: Final = "resetledger-intent-binding/v3"
"""The first line of every binding: it names the layout and separates intent
seals from any other use of the key."""

ENVELOPE_VERSION: Final = 2
"""The envelope version this package writes without a dictionary: raw DEFLATE, then AES-256-GCM."""

ENVELOPE_VERSION_DICTIONARY: Final = 3
"""The envelope version this package writes with a preset dictionary: raw
DEFLATE against the dictionary, which the envelope names (``dict``), then
AES-256-GCM."""

MAX_DICTIONARY: Final = 32 * 1024
"""The longest preset dictionary, in bytes: DEFLATE's window, the most of a
dictionary a stream can refer back to."""

ENVELOPE_DIGEST_DOMAIN: Final = "resetledger-intent-envelope/v1"
"""The first line of an envelope's digest preimage (envelope_digest_preimage)."""

_CONTENT_HASH_DOMAIN: Final = "reset-notification-content-v1"
_OPAQUE: Final = re.compile(r"[A-Za-z0-9._:-]*")
_OPAQUE_CLASS: Final = "[A-Za-z0-9._:-]"


@dataclass(frozen=True)
class Workflow:
    """The channel plan of a challenge. ``order`` is required for ``fallback``."""

    kind: WorkflowKind
    order: Sequence[Channel] = ()


@dataclass(frozen=True)
class Message:
    """The secret-bearing content: the real address (an email address or an
    E.164 phone number), the subject (email only; leave it empty for SMS) and
    the rendered body with the reset link. It leaves the process only sealed,
    and its ``repr`` shows none of it."""

    to: str = field(repr=False)
    body: str = field(repr=False)
    subject: str = field(default="", repr=False)


@dataclass(frozen=True)
class Notification:
    """One password-reset notification on one channel."""

    challenge_id: str
    """Opaque id of the reset challenge: 1 to 128 of ``A-Za-z0-9._:-``. Part of the dedupe key."""
    channel: Channel
    """Part of the dedupe key."""
    workflow: Workflow
    destination_ref: str
    """Opaque reference to the address (1 to 256 of ``A-Za-z0-9._:-``), never the address itself."""
    expires_at: datetime
    """When the challenge expires (timezone-aware). Nothing is sent after it."""
    template_id: str
    """1 to 64 of ``A-Za-z0-9._:-``."""
    template_version: str
    """1 to 32 of ``A-Za-z0-9._:-``. Recorded in the content hash, never in the dedupe key."""
    policy_version: str
    """1 to 32 of ``A-Za-z0-9._:-``."""
    message: Message
    subject_ref: str | None = None
    """Optional opaque reference to the account the challenge is for (1 to 256 of
    ``A-Za-z0-9._:-``), never an address. ``None`` or ``""`` is none: the intent
    then has no ``subject_ref`` member."""
    issued_at: datetime | None = None
    """When the account service issued the challenge (timezone-aware): a
    subject's newest challenge is the one issued last, whatever the expiries.
    ``None`` is the producer's clock at publish. It must be before
    ``expires_at`` and no later than the claim function's clock (which refuses
    the intent otherwise). Sealed with the rest of the intent."""


@dataclass(frozen=True)
class Envelope:
    """The sealed content as it travels in the intent."""

    kms_key_id: str
    """The KeyId GenerateDataKey returned: the KMS key's ARN."""
    edk: str
    """CiphertextBlob of GenerateDataKey, standard padded base64."""
    nonce: str
    """The 12-byte GCM nonce, standard padded base64."""
    ct: str
    """GCM ciphertext followed by its 16-byte tag, standard padded base64."""
    v: Literal[2, 3] = 2
    """2: the GCM plaintext is the raw DEFLATE stream of the canonical
    plaintext; 3: the same, compressed against the preset dictionary that
    ``dict_id`` names."""
    alg: Literal["AES-256-GCM"] = "AES-256-GCM"
    dict_id: str | None = None
    """The wire member ``dict``, version 3 only (and required there): the
    preset dictionary's id, the lowercase hex SHA-256 of its bytes."""

    def to_dict(self) -> dict[str, object]:
        """The envelope as its JSON object, members in the documented order
        (``dict`` after ``kms_key_id``, in version 3 only)."""
        d: dict[str, object] = {"v": self.v, "alg": self.alg, "kms_key_id": self.kms_key_id}
        if self.v == ENVELOPE_VERSION_DICTIONARY:
            d["dict"] = self.dict_id or ""
        d.update({"edk": self.edk, "nonce": self.nonce, "ct": self.ct})
        return d


def dedupe_key(challenge_id: str, channel: Channel) -> str:
    """The dedupe key of a logical message: the hex SHA-256 of
    ``password-reset:<challenge_id>:<channel>``. It is also the idempotency key
    of every send and the GCM AAD of the sealed content."""
    return hashlib.sha256(f"{PURPOSE}:{challenge_id}:{channel}".encode()).hexdigest()


def content_hash(template_id: str, template_version: str, message: Message) -> str:
    """The content hash binding a rendered message to its template: the hex
    SHA-256 of the domain string and the fields template id, template version,
    to, subject (empty when absent) and body, each preceded by its UTF-8
    length as 8 bytes big-endian."""
    h = hashlib.sha256()
    for f in (_CONTENT_HASH_DOMAIN, template_id, template_version, message.to, message.subject, message.body):
        b = f.encode()
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)
    return h.hexdigest()


def _check_opaque(name: str, v: object, max_len: int) -> None:
    if v is None or v == "":
        raise IntentError(name, "missing")
    if not isinstance(v, str):
        raise IntentError(name, "want a string")
    if len(v) > max_len:
        raise IntentError(name, "too long")
    if not _OPAQUE.fullmatch(v):
        raise IntentError(name, f"contains a character outside {_OPAQUE_CLASS}")


def _is_channel(c: object) -> bool:
    return c == "email" or c == "sms"


def _utc(t: object, name: str = "expires_at") -> datetime:
    """t in UTC; IntentError on name when it is not a timezone-aware datetime in 0001..9999."""
    if not isinstance(t, datetime):
        raise IntentError(name, "want a datetime")
    if t.tzinfo is None or t.utcoffset() is None:
        raise IntentError(name, "want a timezone-aware datetime")
    try:
        return t.astimezone(timezone.utc)
    except OverflowError:
        raise IntentError(name, "year outside 0001..9999") from None


def validate_intent_fields(n: Notification) -> None:
    """Checks the intent fields of n (not the message) in the order the Go
    implementation does and raises an IntentError for the first bad one."""
    if not isinstance(n, Notification):
        raise IntentError("body", "not a Notification")
    _check_opaque("challenge_id", n.challenge_id, 128)
    if not _is_channel(n.channel):
        raise IntentError("channel", "unknown channel (want email or sms)")
    wf: object = n.workflow
    kind: object = wf.kind if isinstance(wf, Workflow) else None
    order: object = wf.order if isinstance(wf, Workflow) else None
    seen: set[object] = set()
    if order is not None:
        if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
            raise IntentError("workflow.order", "want a sequence of channels")
        for c in order:
            if not _is_channel(c) or c in seen:
                raise IntentError("workflow.order", "unknown or repeated channel")
            seen.add(c)
    if kind in ("single", "dual"):
        pass
    elif kind == "fallback":
        if len(seen) < 2 or len(seen) > len(CHANNELS):
            raise IntentError("workflow.order", "fallback needs 2 distinct channels")
        if n.channel not in seen:
            raise IntentError("workflow.order", "does not contain the intent's channel")
    else:
        raise IntentError("workflow.kind", "unknown workflow (want single, dual or fallback)")
    _check_opaque("destination_ref", n.destination_ref, 256)
    if n.subject_ref is not None and n.subject_ref != "":
        _check_opaque("subject_ref", n.subject_ref, 256)
    exp: object = n.expires_at
    if exp is None:
        raise IntentError("expires_at", "missing")
    _utc(exp)
    _check_opaque("template_id", n.template_id, 64)
    _check_opaque("template_version", n.template_version, 32)
    _check_opaque("policy_version", n.policy_version, 32)


def issued_at_of(n: Notification, now: datetime) -> datetime:
    """The issued_at an intent for n carries: ``n.issued_at``, or ``now`` when n
    has none. Raises IntentError on ``issued_at`` unless it is a timezone-aware
    datetime before ``n.expires_at`` (which validate_intent_fields checked).
    The Go producer checks it after the expiry, as validate does."""
    t = now if n.issued_at is None else n.issued_at
    if _utc(t, "issued_at") >= _utc(n.expires_at):
        raise IntentError("issued_at", "not before expires_at")
    return t


def validate_message(m: Message) -> None:
    """Checks a message: an address and a body, and every field a string that
    is valid Unicode (a lone surrogate cannot be sealed as the content hash
    reads it)."""
    if not isinstance(m, Message):
        raise IntentError("message", "missing")
    for name in ("to", "subject", "body"):
        v: object = getattr(m, name)
        if name != "subject" and (v is None or v == ""):
            raise IntentError(f"message.{name}", "missing")
        if not isinstance(v, str):
            raise IntentError(f"message.{name}", "want a string")
        try:
            v.encode()
        except UnicodeEncodeError:
            # from None: the encoder's error holds the whole string.
            raise IntentError(f"message.{name}", "not valid UTF-8") from None


def format_time(t: datetime) -> str:
    """Formats t as the wire's issued_at and expires_at: RFC 3339 in UTC with the fraction of
    the second trimmed of trailing zeros (none when whole), as Go's
    time.RFC3339Nano does."""
    u = _utc(t)
    whole = u.strftime("%Y-%m-%dT%H:%M:%S")
    if len(whole) < 19:  # strftime may not pad years below 1000
        whole = f"{u.year:04d}" + whole[whole.index("-") :]
    frac = f"{u.microsecond:06d}".rstrip("0")
    return f"{whole}.{frac}Z" if frac else f"{whole}Z"


def _issued(n: Notification) -> datetime:
    """n's issued_at, which an encoded intent needs; IntentError when it has none."""
    if n.issued_at is None:
        raise IntentError("issued_at", "missing")
    _utc(n.issued_at, "issued_at")
    return n.issued_at


def _lines(domain: str, fields: Sequence[tuple[str, str]]) -> bytes:
    """domain and a line feed, then a line ``<name>:<length>:<value>\\n`` per
    field, the length the value's UTF-8 byte count in decimal."""
    out = bytearray(f"{domain}\n".encode())
    for name, value in fields:
        b = value.encode()
        out += f"{name}:{len(b)}:".encode() + b + b"\n"
    return bytes(out)


def envelope_digest_preimage(e: Envelope) -> bytes:
    """The canonical encoding of envelope e that envelope_digest hashes:
    ENVELOPE_DIGEST_DOMAIN and a line feed, then for v, alg, kms_key_id, dict
    (version 3 only), edk, nonce and ct, in that order, a line
    ``<name>:<length>:<value>\\n``, each value as the intent carries it (v in
    decimal, the base64 members as written)."""
    dict_line = (("dict", e.dict_id or ""),) if e.v == ENVELOPE_VERSION_DICTIONARY else ()
    return _lines(
        ENVELOPE_DIGEST_DOMAIN,
        (("v", str(e.v)), ("alg", e.alg), ("kms_key_id", e.kms_key_id), *dict_line, ("edk", e.edk), ("nonce", e.nonce), ("ct", e.ct)),
    )


def envelope_digest(e: Envelope) -> str:
    """The hex SHA-256 of envelope_digest_preimage: the binding's ``envelope`` field."""
    return hashlib.sha256(envelope_digest_preimage(e)).hexdigest()


def intent_binding(n: Notification, hash_: str, sealed: Envelope) -> bytes:
    """The binding of the intent for n with its content hash and sealed
    content: the bytes the intent key seals (KMS GenerateMac, HMAC_SHA_256)
    into intent_mac, every field the claim function decides on and the
    envelope.

    BINDING_DOMAIN and a line feed, then for each field in the documented
    order a line ``<name>:<length>:<value>\\n``, the length the value's UTF-8
    byte count in decimal, the value as the wire carries it (the times as
    format_time writes them, workflow.order joined by commas, subject_ref and
    workflow.order empty when absent), and last ``envelope``, the
    envelope_digest of sealed. n must carry its issued_at."""
    issued = _issued(n)
    fields = (
        ("schema_version", str(SCHEMA_VERSION)),
        ("purpose", PURPOSE),
        ("challenge_id", n.challenge_id),
        ("channel", n.channel),
        ("dedupe_key", dedupe_key(n.challenge_id, n.channel)),
        ("workflow.kind", n.workflow.kind),
        ("workflow.order", ",".join(n.workflow.order)),
        ("destination_ref", n.destination_ref),
        ("subject_ref", n.subject_ref or ""),
        ("issued_at", format_time(issued)),
        ("expires_at", format_time(n.expires_at)),
        ("template_id", n.template_id),
        ("template_version", n.template_version),
        ("policy_version", n.policy_version),
        ("content_hash", hash_),
        ("envelope", envelope_digest(sealed)),
    )
    return _lines(BINDING_DOMAIN, fields)


def encode_intent(n: Notification, hash_: str, sealed: Envelope, intent_mac: str) -> str:
    """The intent body on the wire for n (which must carry its issued_at) with
    its content hash, sealed content and intent_mac: one JSON object, members
    in the documented order, byte for byte what the Go producer writes."""
    issued = _issued(n)
    if not isinstance(intent_mac, str) or not intent_mac:
        raise IntentError("intent_mac", "empty")
    workflow: dict[str, object] = {"kind": n.workflow.kind}
    if n.workflow.order:
        workflow["order"] = list(n.workflow.order)
    body: dict[str, object] = {
        "schema_version": SCHEMA_VERSION,
        "purpose": PURPOSE,
        "challenge_id": n.challenge_id,
        "channel": n.channel,
        "workflow": workflow,
        "destination_ref": n.destination_ref,
    }
    if n.subject_ref:
        body["subject_ref"] = n.subject_ref
    body.update(
        {
            "issued_at": format_time(issued),
            "expires_at": format_time(n.expires_at),
            "template_id": n.template_id,
            "template_version": n.template_version,
            "policy_version": n.policy_version,
            "content_hash": hash_,
            "sealed_content": sealed.to_dict(),
            "intent_mac": intent_mac,
        }
    )
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
