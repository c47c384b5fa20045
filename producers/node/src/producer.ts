/**
 * The producer: validate a notification, seal its message, publish the
 * intent, retrying only the publish (SQS SendMessage) of the sealed intent.
 *
 * @module
 */
import { setTimeout as delay } from 'node:timers/promises';

import { KMSClient } from '@aws-sdk/client-kms';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';

import { seal, canonicalPlaintext, type DataKeyClient } from './envelope.js';
import { ExpiredError, IntentError, PublishError } from './errors.js';
import {
  contentHash,
  dedupeKey,
  encodeIntent,
  MAX_BODY_SIZE,
  MAX_CIPHERTEXT,
  validateIntentFields,
  validateMessage,
  type Notification,
} from './intent.js';

/** The SQS call the producer makes; an SQSClient is one. */
export type QueueClient = Pick<SQSClient, 'send'>;

/** What {@link validate} computes for a valid notification. */
export interface Validated {
  /** The dedupe key: the idempotency key of every send, and what `ledgerctl explain` shows. */
  dedupeKey: string;
  /** The content hash recorded in the ledger. */
  contentHash: string;
}

/** What {@link Producer.publish} returns. */
export interface PublishResult extends Validated {
  /** The SQS message id of the attempt that succeeded. */
  messageId: string;
  /** SendMessage calls made, the successful one included. */
  attempts: number;
}

/** Options of {@link Producer}. */
export interface ProducerOptions {
  /** The intents queue URL (the stack output IntentQueueUrl). */
  queueUrl: string;
  /** The content key (the stack output ContentKeyArn); a key id or alias works too. */
  keyId: string;
  /**
   * KMS client for GenerateDataKey. Default: a KMSClient from the
   * environment with the SDK's retries off (`maxAttempts: 1`): a failed
   * seal is thrown at once, and calling publish again is safe.
   */
  kms?: DataKeyClient;
  /**
   * SQS client for SendMessage. Default: an SQSClient from the environment
   * with the SDK's retries off, so that the producer's own retries (below)
   * are the only ones. A client you pass keeps its own retry settings, on
   * top of the producer's.
   */
  sqs?: QueueClient;
  /** SendMessage attempts for one publish, the first included (default 3, at least 1). */
  maxSendAttempts?: number;
  /** Backoff before the n-th retry: random in [0, min(max, base * 2^(n-1))] ms (defaults 100 and 2000). */
  retryBaseDelayMs?: number;
  retryMaxDelayMs?: number;
  /** The clock that decides expiry; `() => new Date()` by default. */
  clock?: () => Date;
}

/** Options of one {@link Producer.publish}. */
export interface PublishOptions {
  /** Aborts the AWS calls and the waits between attempts. */
  abortSignal?: AbortSignal;
}

const base64Length = (n: number): number => 4 * Math.ceil(n / 3);

function tooLarge(): IntentError {
  return new IntentError('message', `too large: the sealed intent must fit ${MAX_BODY_SIZE} bytes`);
}

/**
 * Validates a notification exactly as the Go producer does, with no AWS
 * call, and returns its dedupe key and content hash. It throws an
 * {@link IntentError} naming the first bad field (a message whose sealed
 * intent cannot fit the queue's 64 KiB even with the smallest data key KMS
 * could return is too large here already) or an {@link ExpiredError} when
 * `expiresAt` is not after `now`.
 */
export function validate(n: Notification, now: Date = new Date()): Validated {
  validateIntentFields(n);
  const m = n.message;
  validateMessage(m);
  const raw = Buffer.byteLength(m.to, 'utf8') + Buffer.byteLength(m.subject ?? '', 'utf8') + Buffer.byteLength(m.body, 'utf8');
  if (raw > MAX_BODY_SIZE) {
    throw tooLarge();
  }
  const hash = contentHash(n.templateId, n.templateVersion, m);
  const pt = canonicalPlaintext(m);
  const ctLength = pt.length + 16;
  pt.fill(0);
  if (ctLength > MAX_CIPHERTEXT) {
    throw tooLarge();
  }
  // The body with the smallest envelope: a one-character key id, a one-byte
  // data key ciphertext, and the real ciphertext length.
  const smallest = encodeIntent(n, hash, { v: 1, alg: 'AES-256-GCM', kms_key_id: 'k', edk: 'AA==', nonce: 'AAAAAAAAAAAAAAAA', ct: '' });
  if (Buffer.byteLength(smallest, 'utf8') + base64Length(ctLength) > MAX_BODY_SIZE) {
    throw tooLarge();
  }
  if (n.expiresAt.getTime() <= now.getTime()) {
    throw new ExpiredError(n.challengeId, n.channel);
  }
  return { dedupeKey: dedupeKey(n.challengeId, n.channel), contentHash: hash };
}

/** Whether an SDK or network error may pass on a later attempt. */
export function isRetryable(err: unknown): boolean {
  if (err === null || typeof err !== 'object') {
    return false;
  }
  const e = err as { name?: string; code?: string; $retryable?: unknown; $metadata?: { httpStatusCode?: number } };
  if (e.name === 'AbortError') {
    return false;
  }
  if (e.$retryable) {
    return true;
  }
  const status = e.$metadata?.httpStatusCode;
  if (status !== undefined && (status >= 500 || status === 429)) {
    return true;
  }
  const transient = new Set([
    'ThrottlingException', 'Throttling', 'RequestThrottled', 'RequestThrottledException', 'TooManyRequestsException',
    'ServiceUnavailable', 'InternalError', 'InternalFailure', 'RequestTimeout', 'RequestTimeoutException', 'TimeoutError',
    'ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN',
  ]);
  return transient.has(e.name ?? '') || transient.has(e.code ?? '');
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    return `${err.name}${status === undefined ? '' : ` (HTTP ${status})`}: ${err.message}`;
  }
  return 'non-error thrown';
}

/**
 * Publishes password-reset notification intents. One producer is safe to
 * share across concurrent publishes. It logs nothing.
 */
export class Producer {
  readonly #queueUrl: string;
  readonly #keyId: string;
  readonly #kms: DataKeyClient;
  readonly #sqs: QueueClient;
  readonly #attempts: number;
  readonly #base: number;
  readonly #max: number;
  readonly #clock: () => Date;

  constructor(opts: ProducerOptions) {
    if (!opts || typeof opts.queueUrl !== 'string' || opts.queueUrl === '' || typeof opts.keyId !== 'string' || opts.keyId === '') {
      throw new TypeError('resetledger: Producer needs a queueUrl and a keyId');
    }
    this.#queueUrl = opts.queueUrl;
    this.#keyId = opts.keyId;
    this.#kms = opts.kms ?? new KMSClient({ maxAttempts: 1 });
    this.#sqs = opts.sqs ?? new SQSClient({ maxAttempts: 1 });
    this.#attempts = Math.max(1, Math.floor(opts.maxSendAttempts ?? 3));
    this.#base = Math.max(0, opts.retryBaseDelayMs ?? 100);
    this.#max = Math.max(this.#base, opts.retryMaxDelayMs ?? 2000);
    this.#clock = opts.clock ?? (() => new Date());
  }

  /** {@link validate} at the producer's clock. */
  validate(n: Notification): Validated {
    return validate(n, this.#clock());
  }

  /**
   * Validates n, seals its message under the intent's dedupe key (one KMS
   * GenerateDataKey call) and sends the intent to the queue. A failed send
   * is retried with the same sealed intent while the error is transient,
   * up to `maxSendAttempts`, and never once the challenge has expired;
   * nothing else is retried. Publishing a notification twice is harmless:
   * the ledger deduplicates by its dedupe key.
   *
   * Throws {@link IntentError} or {@link ExpiredError} before any AWS call
   * for invalid input, {@link PublishError} when KMS or SQS failed. An
   * intent within a few hundred bytes of the queue's limit can only be
   * found too large once KMS answered (an IntentError on `message` then).
   */
  async publish(n: Notification, opts: PublishOptions = {}): Promise<PublishResult> {
    const v = this.validate(n);
    const signal = opts.abortSignal;
    const callOpts = signal === undefined ? {} : { abortSignal: signal };
    let sealed;
    try {
      sealed = await seal(this.#kms, this.#keyId, v.dedupeKey, n.message, callOpts);
    } catch (err) {
      throw new PublishError('seal', n.challengeId, n.channel, 0, `seal: KMS GenerateDataKey failed: ${describe(err)}`, err);
    }
    const body = encodeIntent(n, v.contentHash, sealed);
    if (Buffer.byteLength(body, 'utf8') > MAX_BODY_SIZE) {
      throw tooLarge();
    }
    for (let attempt = 1; ; attempt++) {
      try {
        const out = await this.#sqs.send(new SendMessageCommand({ QueueUrl: this.#queueUrl, MessageBody: body }), callOpts);
        return { ...v, messageId: out.MessageId ?? '', attempts: attempt };
      } catch (err) {
        if (attempt >= this.#attempts || !isRetryable(err) || signal?.aborted) {
          throw new PublishError('send', n.challengeId, n.channel, attempt, `send: SQS SendMessage failed after ${attempt} attempt(s): ${describe(err)}`, err);
        }
        const wait = Math.random() * Math.min(this.#max, this.#base * 2 ** (attempt - 1));
        if (this.#clock().getTime() + wait >= n.expiresAt.getTime()) {
          throw new PublishError('send', n.challengeId, n.channel, attempt,
            `send: SQS SendMessage failed after ${attempt} attempt(s) and the challenge expires before the next one: ${describe(err)}`, err);
        }
        try {
          await delay(wait, undefined, signal === undefined ? {} : { signal });
        } catch (abort) {
          throw new PublishError('send', n.challengeId, n.channel, attempt, `send: aborted after ${attempt} attempt(s): ${describe(err)}`, err);
        }
      }
    }
  }
}


