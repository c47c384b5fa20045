"""The producer: validate a notification, seal its message, seal the intent's
fields, publish the intent, retrying only the publish (SQS SendMessage) of the
sealed intent.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Final, Protocol

import boto3
from botocore.config import Config

from .envelope import DataKeyClient, canonical_plaintext, check_dictionary, compress, dictionary_id, seal
from .errors import ExpiredError, IntentError, PublishError
from .intent import (
    ENVELOPE_VERSION,
    ENVELOPE_VERSION_DICTIONARY,
    INTENT_MAC_LENGTH,
    MAX_BODY_SIZE,
    MAX_CIPHERTEXT,
    MAX_PLAINTEXT,
    Envelope,
    Notification,
    content_hash,
    dedupe_key,
    encode_intent,
    intent_binding,
    issued_at_of,
    validate_intent_fields,
    validate_message,
)
from .intentseal import MacClient, sign_intent

__all__ = ["KeyClient", "Producer", "PublishResult", "QueueClient", "Validated", "is_retryable", "validate"]


class QueueClient(Protocol):
    """The SQS call the producer makes; a boto3 SQS client is one."""

    def send_message(self, *, QueueUrl: str, MessageBody: str) -> Mapping[str, object]: ...


class KeyClient(DataKeyClient, MacClient, Protocol):
    """The KMS calls the producer makes (GenerateDataKey on the content key,
    GenerateMac on the intent key); a boto3 KMS client is one."""


@dataclass(frozen=True)
class Validated:
    """What validate computes for a valid notification."""

    dedupe_key: str
    """The dedupe key: the idempotency key of every send, and what ``ledgerctl explain`` shows."""
    content_hash: str
    """The content hash recorded in the ledger."""
    issued_at: datetime
    """The intent's issued_at: the notification's, or the clock's time when it had none."""


@dataclass(frozen=True)
class PublishResult(Validated):
    """What Producer.publish returns."""

    message_id: str
    """The SQS message id of the attempt that succeeded."""
    attempts: int
    """SendMessage calls made, the successful one included."""


def _base64_length(n: int) -> int:
    return 4 * ((n + 2) // 3)


def _too_large() -> IntentError:
    return IntentError("message", f"too large: the sealed intent must fit {MAX_BODY_SIZE} bytes")


def _utf8_len(s: str) -> int:
    return len(s.encode())


def validate(n: Notification, now: datetime | None = None, *, dictionary: bytes | bytearray | None = None) -> Validated:
    """Validates a notification exactly as the Go producer does, with no AWS
    call, and returns its dedupe key, content hash and issued_at (``now``
    when it has none).

    Raises IntentError naming the first bad field (a message whose sealed
    intent cannot fit the queue's 64 KiB even with the smallest data key KMS
    could return is too large here already), ExpiredError when ``expires_at``
    is not after ``now`` (default: the current time), and then IntentError on
    ``issued_at`` when the issued_at is not before ``expires_at``. With
    ``dictionary`` (see Producer), the size is that of the version 3 envelope
    sealed with it.
    """
    if dictionary is not None:
        dictionary = check_dictionary(dictionary)
    validate_intent_fields(n)
    m = n.message
    validate_message(m)
    if _utf8_len(m.to) + _utf8_len(m.subject) + _utf8_len(m.body) > MAX_BODY_SIZE:
        raise _too_large()
    hash_ = content_hash(n.template_id, n.template_version, m)
    pt = canonical_plaintext(m)
    if len(pt) > MAX_PLAINTEXT:
        pt[:] = bytes(len(pt))
        raise _too_large()
    # Sealing encrypts the DEFLATE stream, which zlib writes the same way
    # every time: its length is the ciphertext's, less the tag.
    ct_length = len(compress(pt, dictionary)) + 16
    pt[:] = bytes(len(pt))
    if ct_length > MAX_CIPHERTEXT:
        raise _too_large()
    # The body with the smallest envelope (a one-character key id, a one-byte
    # data key ciphertext, the real ciphertext length and, with a dictionary,
    # its id) and the shortest issued_at RFC 3339 writes (any whole second):
    # checked before the clock is read, as the Go producer does.
    shortest = datetime(2000, 1, 1, tzinfo=timezone.utc)
    envelope = (
        Envelope(v=ENVELOPE_VERSION, kms_key_id="k", edk="AA==", nonce="AAAAAAAAAAAAAAAA", ct="")
        if dictionary is None
        else Envelope(
            v=ENVELOPE_VERSION_DICTIONARY,
            kms_key_id="k",
            dict_id=dictionary_id(dictionary),
            edk="AA==",
            nonce="AAAAAAAAAAAAAAAA",
            ct="",
        )
    )
    smallest = encode_intent(replace(n, issued_at=shortest), hash_, envelope, "A" * INTENT_MAC_LENGTH)
    if _utf8_len(smallest) + _base64_length(ct_length) > MAX_BODY_SIZE:
        raise _too_large()
    if now is None:
        now = datetime.now(timezone.utc)
    if n.expires_at <= now:
        raise ExpiredError(n.challenge_id, n.channel)
    issued_at = issued_at_of(n, now)
    return Validated(dedupe_key=dedupe_key(n.challenge_id, n.channel), content_hash=hash_, issued_at=issued_at)


_TRANSIENT: Final = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
        "RequestTimeout",
        "RequestTimeoutException",
        "AWS.SimpleQueueService.RequestThrottled",
        "KmsThrottled",
    }
)


def _error_fields(err: BaseException) -> tuple[str, int | None]:
    """The service error code and HTTP status of a botocore ClientError (or
    anything shaped like one), else ("", None)."""
    response: object = getattr(err, "response", None)
    if not isinstance(response, Mapping):
        return "", None
    error: object = response.get("Error")
    code: object = error.get("Code") if isinstance(error, Mapping) else None
    meta: object = response.get("ResponseMetadata")
    status: object = meta.get("HTTPStatusCode") if isinstance(meta, Mapping) else None
    return (code if isinstance(code, str) else ""), (status if isinstance(status, int) else None)


def is_retryable(err: BaseException) -> bool:
    """Whether an SDK or network error may pass on a later attempt: a
    throttling or 5xx answer, or a connection that failed or timed out."""
    # botocore's connection errors (EndpointConnectionError, ConnectionClosedError,
    # ReadTimeoutError, ConnectTimeoutError) are HTTPClientErrors; named, not
    # imported, so the module depends on no botocore internals.
    for cls in type(err).__mro__:
        if cls.__name__ in ("HTTPClientError", "ConnectionError", "TimeoutError") and cls.__module__ in (
            "botocore.exceptions",
            "builtins",
        ):
            return True
    code, status = _error_fields(err)
    if status is not None and (status >= 500 or status == 429):
        return True
    return code in _TRANSIENT


def _describe(err: BaseException) -> str:
    code, status = _error_fields(err)
    head = type(err).__name__ + (f" {code}" if code else "") + ("" if status is None else f" (HTTP {status})")
    return f"{head}: {err}"


def _sdk_config() -> Config:
    # The SDK's retries off: the producer's own retries are the only ones.
    return Config(retries={"total_max_attempts": 1, "mode": "standard"})


def _default_kms() -> KeyClient:
    return boto3.client("kms", config=_sdk_config())


def _default_sqs() -> QueueClient:
    return boto3.client("sqs", config=_sdk_config())


class Producer:
    """Publishes password-reset notification intents.

    One producer is safe to share across threads (boto3 clients are). It logs
    nothing.

    ``queue_url``: the intents queue URL (the stack output IntentQueueUrl).
    ``key_id``: the content key (the stack output ContentKeyArn); a key id or
    alias works too.
    ``intent_key_arn``: the intent key (the stack output IntentKeyArn;
    environment INTENT_KEY_ARN), an HMAC_256 KMS key whose GenerateMac seals
    the intent's fields. The claim function refuses an intent without a seal
    it can verify.
    ``kms``, ``sqs``: the clients (``kms`` for GenerateDataKey and GenerateMac). Default: boto3 clients from the environment
    (region, credentials, ``AWS_ENDPOINT_URL``) with the SDK's retries off, so
    a failed seal is raised at once and the producer's own send retries are
    the only ones. A client you pass keeps its own retry settings, on top of
    the producer's.
    ``max_send_attempts``: SendMessage attempts for one publish, the first
    included (default 3, at least 1).
    ``retry_base_delay``, ``retry_max_delay``: backoff before the n-th retry,
    random in [0, min(max, base * 2**(n-1))] seconds (defaults 0.1 and 2.0).
    ``clock``: the clock that decides expiry and the default issued_at; the
    current UTC time by default.
    ``dictionary``: a preset DEFLATE dictionary (bytes, 1 to 32,768;
    typically the canonical plaintext of the template rendered with an empty
    address and link): every message is compressed against it and sealed as envelope
    version 3, which names it by the hex SHA-256 of its bytes. The stack must
    hold the same bytes (internal/dictionaries) before this producer uses it:
    the claim function dead-letters an intent naming a dictionary it lacks
    (reason ``sealed_content.dict``). Without it, envelope version 2. An empty
    or longer dictionary raises ValueError here.
    """

    def __init__(
        self,
        queue_url: str,
        key_id: str,
        intent_key_arn: str,
        *,
        kms: KeyClient | None = None,
        sqs: QueueClient | None = None,
        max_send_attempts: int = 3,
        retry_base_delay: float = 0.1,
        retry_max_delay: float = 2.0,
        clock: Callable[[], datetime] | None = None,
        dictionary: bytes | bytearray | None = None,
    ) -> None:
        if not all(isinstance(v, str) and v for v in (queue_url, key_id, intent_key_arn)):
            raise TypeError("resetledger: Producer needs a queue_url, a key_id (content key) and an intent_key_arn (intent key)")
        self._queue_url = queue_url
        self._key_id = key_id
        self._intent_key_arn = intent_key_arn
        self._kms: KeyClient = kms if kms is not None else _default_kms()
        self._sqs: QueueClient = sqs if sqs is not None else _default_sqs()
        self._attempts = max(1, int(max_send_attempts))
        self._base = max(0.0, float(retry_base_delay))
        self._max = max(self._base, float(retry_max_delay))
        self._clock: Callable[[], datetime] = clock if clock is not None else (lambda: datetime.now(timezone.utc))
        # A copy: the caller's bytearray changing later cannot change what is sealed.
        self._dictionary: bytes | None = check_dictionary(dictionary) if dictionary is not None else None

    def validate(self, n: Notification) -> Validated:
        """validate at the producer's clock, with the producer's dictionary."""
        return validate(n, self._clock(), dictionary=self._dictionary)

    def publish(self, n: Notification, *, cancel: threading.Event | None = None) -> PublishResult:
        """Validates n, seals its message under the intent's dedupe key (one KMS
        GenerateDataKey call), seals the intent's fields and envelope under the intent key
        (one KMS GenerateMac call) and sends the intent to the queue.

        A failed send is retried with the same sealed intent while the error is
        transient, up to ``max_send_attempts``, and never once the challenge
        has expired; nothing else is retried. Publishing a notification twice
        is harmless: the ledger deduplicates by its dedupe key. ``cancel``, when
        set, ends the waits between attempts and prevents further attempts.

        Raises IntentError or ExpiredError before any AWS call for invalid
        input, PublishError when KMS or SQS failed. An intent within a few
        hundred bytes of the queue's limit can only be found too large once KMS
        answered (an IntentError on ``message`` then).
        """
        v = self.validate(n)
        issued = replace(n, issued_at=v.issued_at)
        try:
            sealed = seal(self._kms, self._key_id, v.dedupe_key, n.message, dictionary=self._dictionary)
        except Exception as err:
            raise PublishError(
                "seal", n.challenge_id, n.channel, 0, f"seal: KMS GenerateDataKey failed: {_describe(err)}"
            ) from err
        # The seal binds the envelope too (its digest): the content is sealed first.
        binding = intent_binding(issued, v.content_hash, sealed)
        try:
            mac = sign_intent(self._kms, self._intent_key_arn, binding)
        except Exception as err:
            raise PublishError("sign", n.challenge_id, n.channel, 0, f"sign: KMS GenerateMac failed: {_describe(err)}") from err
        body = encode_intent(issued, v.content_hash, sealed, mac)
        if _utf8_len(body) > MAX_BODY_SIZE:
            raise _too_large()
        attempt = 0
        while True:
            attempt += 1
            try:
                out = self._sqs.send_message(QueueUrl=self._queue_url, MessageBody=body)
            except Exception as err:
                detail = f"SQS SendMessage failed after {attempt} attempt(s)"
                if attempt >= self._attempts or not is_retryable(err):
                    raise PublishError("send", n.challenge_id, n.channel, attempt, f"send: {detail}: {_describe(err)}") from err
                if cancel is not None and cancel.is_set():
                    raise PublishError(
                        "send", n.challenge_id, n.channel, attempt, f"send: cancelled after {attempt} attempt(s): {_describe(err)}"
                    ) from err
                wait = random.uniform(0, min(self._max, self._base * 2 ** (attempt - 1)))
                if self._clock() + timedelta(seconds=wait) >= n.expires_at:
                    raise PublishError(
                        "send",
                        n.challenge_id,
                        n.channel,
                        attempt,
                        f"send: {detail} and the challenge expires before the next one: {_describe(err)}",
                    ) from err
                if cancel is None:
                    time.sleep(wait)
                elif cancel.wait(wait):
                    raise PublishError(
                        "send", n.challenge_id, n.channel, attempt, f"send: cancelled after {attempt} attempt(s): {_describe(err)}"
                    ) from err
                continue
            message_id = out.get("MessageId")
            return PublishResult(
                dedupe_key=v.dedupe_key,
                content_hash=v.content_hash,
                issued_at=v.issued_at,
                message_id=message_id if isinstance(message_id, str) else "",
                attempts=attempt,
            )
