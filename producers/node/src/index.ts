/**
 * @resetledger/producer: what an account service written for Node.js uses
 * to publish password-reset notification intents to a resetledger stack.
 *
 * ```ts
 * import { Producer } from '@resetledger/producer';
 *
 * const producer = new Producer({
 *   queueUrl: process.env.INTENT_QUEUE_URL!, keyId: process.env.CONTENT_KEY_ARN!, intentKeyArn: process.env.INTENT_KEY_ARN!,
 * });
 * const { dedupeKey, messageId } = await producer.publish({
 *   challengeId: challenge.id, channel: 'email', workflow: { kind: 'single' },
 *   destinationRef: `acct-${account.id}:email`, issuedAt: challenge.issuedAt, expiresAt: challenge.expiresAt,
 *   templateId: 'reset-email', templateVersion: '3', policyVersion: 'policy-1',
 *   message: { to: account.email, subject, body },
 * });
 * ```
 *
 * The specification is docs/intent-v2.md (and schema/intent-v3.schema.json)
 * in the resetledger repository.
 *
 * @packageDocumentation
 */
export { Producer, validate, isRetryable } from './producer.js';
export type { ProducerOptions, PublishOptions, PublishResult, QueueClient, Validated, ValidateOptions } from './producer.js';
export { seal, canonicalPlaintext, encryptionContext, aad, dictionaryId, ENCRYPTION_CONTEXT_PURPOSE } from './envelope.js';
export type { DataKeyClient, SealOptions } from './envelope.js';
export { signIntent, encodeMac, MAC_ALGORITHM } from './intentseal.js';
export type { MacClient, SignOptions } from './intentseal.js';
export {
  dedupeKey,
  contentHash,
  intentBinding,
  envelopeDigest,
  envelopeDigestPreimage,
  encodeIntent,
  formatTime,
  validateIntentFields,
  validateMessage,
  CHANNELS,
  PURPOSE,
  SCHEMA_VERSION,
  BINDING_DOMAIN,
  ENVELOPE_DIGEST_DOMAIN,
  INTENT_MAC_LENGTH,
  MAX_BODY_SIZE,
  MAX_CIPHERTEXT,
  MAX_PLAINTEXT,
  ENVELOPE_VERSION,
  ENVELOPE_VERSION_DICTIONARY,
  MAX_DICTIONARY,
} from './intent.js';
export type { Channel, Envelope, Issued, Message, Notification, Workflow, WorkflowKind } from './intent.js';
export { ProducerError, IntentError, ExpiredError, PublishError } from './errors.js';
export type { PublishStage } from './errors.js';
