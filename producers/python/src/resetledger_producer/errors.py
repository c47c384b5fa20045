"""The errors the producer raises.

None of them carries the message, the address or the reset link: not in its
text, not in any attribute, not in a chained exception. Log them as they are.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["ProducerError", "IntentError", "ExpiredError", "PublishError", "PublishStage"]


class ProducerError(Exception):
    """Base class of every error the producer raises on purpose.

    ``code`` is a stable, machine-readable code (``ERR_...``), the same as the
    Node.js producer's.
    """

    code: str

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class IntentError(ProducerError):
    """The notification is not a valid intent.

    Nothing was sealed or sent, and publishing it again cannot help. ``field``
    names the intent field as the wire format and the consumer name it
    (``channel``, ``workflow.order``, ``destination_ref``, ``message.body``,
    ...); ``reason`` says what is wrong without quoting the value.
    """

    field: str
    reason: str

    def __init__(self, field: str, reason: str) -> None:
        super().__init__("ERR_INVALID_INTENT", f"resetledger: invalid intent: {field}: {reason}")
        self.field = field
        self.reason = reason


class ExpiredError(ProducerError):
    """The challenge expired before the intent could be published.

    Nothing was sent (or, after a failed attempt, nothing more will be tried).
    The consumer would record it expired without sending anything anyway.
    """

    challenge_id: str
    channel: str

    def __init__(self, challenge_id: str, channel: str, detail: str = "challenge already expired") -> None:
        super().__init__("ERR_CHALLENGE_EXPIRED", f"resetledger: publish {challenge_id}/{channel}: {detail}")
        self.challenge_id = challenge_id
        self.channel = channel


PublishStage = Literal["seal", "sign", "send"]
"""Where a publish failed: sealing the content (KMS GenerateDataKey), sealing
the intent's fields (KMS GenerateMac) or sending (SQS SendMessage)."""


class PublishError(ProducerError):
    """An AWS call failed.

    ``stage`` says which; ``attempts`` how many SendMessage calls were made (0
    when sealing or signing failed); ``__cause__`` is the SDK's error (it can hold no
    secret: KMS never sees the message, and SQS sees only the sealed intent).
    Publishing the same notification again is safe: the ledger deduplicates by
    the intent's dedupe key.
    """

    stage: PublishStage
    attempts: int
    challenge_id: str
    channel: str

    def __init__(self, stage: PublishStage, challenge_id: str, channel: str, attempts: int, detail: str) -> None:
        super().__init__("ERR_PUBLISH", f"resetledger: publish {challenge_id}/{channel}: {detail}")
        self.stage = stage
        self.attempts = attempts
        self.challenge_id = challenge_id
        self.channel = channel
