"""The intent: its fields and their rules, the dedupe key, the content hash and
the wire encoding.

docs/intent-v1.md in the resetledger repository is the specification;
testdata/vectors holds the vectors this module is tested against.
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
    "CHANNELS",
    "MAX_BODY_SIZE",
    "MAX_CIPHERTEXT",
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
    "format_time",
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

SCHEMA_VERSION: Final = 1
"""The only schema_version."""

MAX_BODY_SIZE: Final = 64 * 1024
"""The largest intent body the consumer accepts, in bytes (64 KiB)."""

MAX_CIPHERTEXT: Final = 64 * 1024
"""The largest envelope ciphertext (ct) the consumer accepts, in bytes."""

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
    v: Literal[1] = 1
    alg: Literal["AES-256-GCM"] = "AES-256-GCM"

    def to_dict(self) -> dict[str, object]:
        """The envelope as its JSON object, members in the documented order."""
        return {"v": self.v, "alg": self.alg, "kms_key_id": self.kms_key_id, "edk": self.edk, "nonce": self.nonce, "ct": self.ct}


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


def _utc(t: datetime) -> datetime:
    """t in UTC; IntentError when it is not a timezone-aware datetime in 0001..9999."""
    if t.tzinfo is None or t.utcoffset() is None:
        raise IntentError("expires_at", "want a timezone-aware datetime")
    try:
        return t.astimezone(timezone.utc)
    except OverflowError:
        raise IntentError("expires_at", "year outside 0001..9999") from None


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
    if not isinstance(exp, datetime):
        raise IntentError("expires_at", "want a datetime")
    _utc(exp)
    _check_opaque("template_id", n.template_id, 64)
    _check_opaque("template_version", n.template_version, 32)
    _check_opaque("policy_version", n.policy_version, 32)


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
    """Formats t as the wire's expires_at: RFC 3339 in UTC with the fraction of
    the second trimmed of trailing zeros (none when whole), as Go's
    time.RFC3339Nano does."""
    u = _utc(t)
    whole = u.strftime("%Y-%m-%dT%H:%M:%S")
    if len(whole) < 19:  # strftime may not pad years below 1000
        whole = f"{u.year:04d}" + whole[whole.index("-") :]
    frac = f"{u.microsecond:06d}".rstrip("0")
    return f"{whole}.{frac}Z" if frac else f"{whole}Z"


def encode_intent(n: Notification, hash_: str, sealed: Envelope) -> str:
    """The intent body on the wire for n with its content hash and sealed
    content: one JSON object, members in the documented order, byte for byte
    what the Go producer writes."""
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
            "expires_at": format_time(n.expires_at),
            "template_id": n.template_id,
            "template_version": n.template_version,
            "policy_version": n.policy_version,
            "content_hash": hash_,
            "sealed_content": sealed.to_dict(),
        }
    )
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
