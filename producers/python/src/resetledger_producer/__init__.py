"""resetledger_producer: what an account service written in Python uses to
publish password-reset notification intents to a resetledger stack.

.. code-block:: python

    from resetledger_producer import Message, Notification, Producer, Workflow

    producer = Producer(os.environ["INTENT_QUEUE_URL"], os.environ["CONTENT_KEY_ARN"], os.environ["INTENT_KEY_ARN"])
    result = producer.publish(Notification(
        challenge_id=challenge.id, channel="email", workflow=Workflow("single"),
        destination_ref=f"acct-{account.id}:email", subject_ref=f"acct-{account.id}",
        issued_at=challenge.issued_at, expires_at=challenge.expires_at,
        template_id="reset-email", template_version="3", policy_version="policy-1",
        message=Message(to=account.email, subject=subject, body=body),
    ))

The specification is docs/intent-v2.md (and schema/intent-v3.schema.json) in
the resetledger repository.
"""

from .envelope import (
    ENCRYPTION_CONTEXT_PURPOSE,
    DataKey,
    DataKeyClient,
    aad,
    canonical_plaintext,
    dictionary_id,
    encryption_context,
    seal,
    seal_with,
)
from .errors import ExpiredError, IntentError, ProducerError, PublishError, PublishStage
from .intent import (
    BINDING_DOMAIN,
    CHANNELS,
    ENVELOPE_DIGEST_DOMAIN,
    ENVELOPE_VERSION,
    ENVELOPE_VERSION_DICTIONARY,
    INTENT_MAC_LENGTH,
    MAX_BODY_SIZE,
    MAX_CIPHERTEXT,
    MAX_DICTIONARY,
    MAX_PLAINTEXT,
    PURPOSE,
    SCHEMA_VERSION,
    Channel,
    Envelope,
    Message,
    Notification,
    Workflow,
    WorkflowKind,
    content_hash,
    dedupe_key,
    encode_intent,
    envelope_digest,
    envelope_digest_preimage,
    format_time,
    intent_binding,
    validate_intent_fields,
    validate_message,
)
from .intentseal import MAC_ALGORITHM, MacClient, encode_mac, sign_intent
from .producer import KeyClient, Producer, PublishResult, QueueClient, Validated, is_retryable, validate

__all__ = [
    "BINDING_DOMAIN",
    "CHANNELS",
    "ENCRYPTION_CONTEXT_PURPOSE",
    "ENVELOPE_DIGEST_DOMAIN",
    "ENVELOPE_VERSION",
    "ENVELOPE_VERSION_DICTIONARY",
    "INTENT_MAC_LENGTH",
    "MAC_ALGORITHM",
    "MAX_BODY_SIZE",
    "MAX_CIPHERTEXT",
    "MAX_DICTIONARY",
    "MAX_PLAINTEXT",
    "PURPOSE",
    "SCHEMA_VERSION",
    "Channel",
    "DataKey",
    "DataKeyClient",
    "Envelope",
    "ExpiredError",
    "IntentError",
    "KeyClient",
    "MacClient",
    "Message",
    "Notification",
    "Producer",
    "ProducerError",
    "PublishError",
    "PublishResult",
    "PublishStage",
    "QueueClient",
    "Validated",
    "Workflow",
    "WorkflowKind",
    "aad",
    "canonical_plaintext",
    "content_hash",
    "dedupe_key",
    "dictionary_id",
    "encode_intent",
    "encode_mac",
    "encryption_context",
    "envelope_digest",
    "envelope_digest_preimage",
    "format_time",
    "intent_binding",
    "is_retryable",
    "seal",
    "seal_with",
    "sign_intent",
    "validate",
    "validate_intent_fields",
    "validate_message",
]
