/**
 * The producer: validate a notification, seal its message, seal the
 * intent's fields and envelope, publish the intent, retrying only the publish (SQS
 * SendMessage) of the sealed intent.
 *
 * @module
 */
import { setTimeout as delay } from 'node:timers/promises';

import { KMSClient } from '@aws-sdk/client-kms';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';

import { seal, canonicalPlaintext, checkDictionary, compress, dictionaryId, type DataKeyClient } from './envelope.js';
import { ExpiredError, IntentError, PublishError } from './errors.js';
import {
  contentHash,
  dedupeKey,
  encodeIntent,
  ENVELOPE_VERSION,
  ENVELOPE_VERSION_DICTIONARY,
  intentBinding,
  issuedAtOf,
  INTENT_MAC_LENGTH,
  MAX_BODY_SIZE,
  MAX_PLAINTEXT,
  MAX_CIPHERTEXT,
  validateIntentFields,
  validateMessage,
  type Notification,
} from './intent.js';
import { signIntent, type MacClient } from './intentseal.js';

/** The SQS call the producer makes; an SQSClient is one. */
export type QueueClient = Pick<SQSClient, 'send'>;

/** What {@link validate} computes for a valid notification. */
export interface Validated {
  /** The dedupe key: the idempotency key of every send, and what `ledgerctl explain` shows. */
  dedupeKey: string;
  /** The content hash recorded in the ledger. */
  contentHash: string;
  /** The intent's issued_at: the notification's issuedAt, or the clock's time when it had none. */
  issuedAt: Date;
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
   * The intent key (the stack output IntentKeyArn; environment
   * INTENT_KEY_ARN): an HMAC_256 KMS key whose GenerateMac seals the
   * intent's fields. The claim function refuses an intent without a seal
   * it can verify.
   */
  intentKeyArn: string;
  /**
   * KMS client for GenerateDataKey (content key) and GenerateMac (intent
   * key). Default: a KMSClient from the environment with the SDK's retries
   * off (`maxAttempts: 1`): a failed KMS call is thrown at once, and calling
   * publish again is safe.
   */
  kms?: DataKeyClient & MacClient;
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
  /** The clock that decides expiry and the default issued_at; `() => new Date()` by default. */
  clock?: () => Date;
  /**
   * A preset DEFLATE dictionary (1 to 32,768 bytes; typically the canonical
   * plaintext of the template rendered with an empty address and link): every message
   * is compressed against it and sealed as envelope version 3, which names
   * it by the hex SHA-256 of its bytes. The stack must hold the same bytes
   * (internal/dictionaries) before this producer uses it: the claim
   * function dead-letters an intent naming a dictionary it lacks (reason
   * `sealed_content.dict`). Without it, envelope version 2.
   */
  dictionary?: Uint8Array;
}

/** Options of {@link validate}. */
export interface ValidateOptions {
  /**
   * The preset dictionary the message will be sealed with (see
   * {@link ProducerOptions.dictionary}): the size check compresses with it
   * and counts the envelope's `dict`.
   */
  dictionary?: Uint8Array;
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
 * call, and returns its dedupe key, content hash and issued_at (`now` when
 * it has none). It throws an {@link IntentError} naming the first bad field
 * (a message whose sealed intent cannot fit the queue's 64 KiB even with
 * the smallest data key KMS could return is too large here already), an
 * {@link ExpiredError} when `expiresAt` is not after `now`, and then an
 * IntentError on `issued_at` when the issued_at is not before `expiresAt`.
 * With `opts.dictionary`, the size is that of the version 3 envelope sealed
 * with it.
 */
export function validate(n: Notification, now: Date = new Date(), opts: ValidateOptions = {}): Validated {
  const dictionary = opts.dictionary;
  if (dictionary !== undefined) {
    checkDictionary(dictionary);
  }
  validateIntentFields(n);
  const m = n.message;
  validateMessage(m);
  const raw = Buffer.byteLength(m.to, 'utf8') + Buffer.byteLength(m.subject ?? '', 'utf8') + Buffer.byteLength(m.body, 'utf8');
  if (raw > MAX_BODY_SIZE) {
    throw tooLarge();
  }
  const hash = contentHash(n.templateId, n.templateVersion, m);
  const pt = canonicalPlaintext(m);
  if (pt.length > MAX_PLAINTEXT) {
    pt.fill(0);
    throw tooLarge();
  }
  // Sealing encrypts the DEFLATE stream, which zlib writes the same way
  // every time: its length is the ciphertext's, less the tag.
  const z = compress(pt, dictionary);
  const ctLength = z.length + 16;
  z.fill(0);
  pt.fill(0);
  if (ctLength > MAX_CIPHERTEXT) {
    throw tooLarge();
  }
  // The body with the smallest envelope (a one-character key id, a one-byte
  // data key ciphertext, the real ciphertext length and, with a dictionary,
  // its id) and the shortest issued_at RFC 3339 writes (any whole second):
  // checked before the clock is read, as the Go producer does.
  const shortest = new Date(Date.UTC(2000, 0, 1));
  const envelope = dictionary === undefined
    ? { v: ENVELOPE_VERSION, alg: 'AES-256-GCM', kms_key_id: 'k', edk: 'AA==', nonce: 'AAAAAAAAAAAAAAAA', ct: '' } as const
    : { v: ENVELOPE_VERSION_DICTIONARY, alg: 'AES-256-GCM', kms_key_id: 'k', dict: dictionaryId(dictionary), edk: 'AA==', nonce: 'AAAAAAAAAAAAAAAA', ct: '' } as const;
  const smallest = encodeIntent({ ...n, issuedAt: shortest }, hash, envelope, 'A'.repeat(INTENT_MAC_LENGTH));
  if (Buffer.byteLength(smallest, 'utf8') + base64Length(ctLength) > MAX_BODY_SIZE) {
    throw tooLarge();
  }
  if (n.expiresAt.getTime() <= now.getTime()) {
    throw new ExpiredError(n.challengeId, n.channel);
  }
  const issuedAt = issuedAtOf(n, now);
  return { dedupeKey: dedupeKey(n.challengeId, n.channel), contentHash: hash, issuedAt };
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
  readonly #intentKeyArn: string;
  readonly #kms: DataKeyClient & MacClient;
  readonly #sqs: QueueClient;
  readonly #attempts: number;
  readonly #base: number;
  readonly #max: number;
  readonly #clock: () => Date;
  readonly #dictionary: Uint8Array | undefined;

  constructor(opts: ProducerOptions) {
    const given = (v: unknown): v is string => typeof v === 'string' && v !== '';
    if (!opts || !given(opts.queueUrl) || !given(opts.keyId) || !given(opts.intentKeyArn)) {
      throw new TypeError('resetledger: Producer needs a queueUrl, a keyId (content key) and an intentKeyArn (intent key)');
    }
    this.#queueUrl = opts.queueUrl;
    this.#keyId = opts.keyId;
    this.#intentKeyArn = opts.intentKeyArn;
    this.#kms = opts.kms ?? new KMSClient({ maxAttempts: 1 });
    this.#sqs = opts.sqs ?? new SQSClient({ maxAttempts: 1 });
    this.#attempts = Math.max(1, Math.floor(opts.maxSendAttempts ?? 3));
    this.#base = Math.max(0, opts.retryBaseDelayMs ?? 100);
    this.#max = Math.max(this.#base, opts.retryMaxDelayMs ?? 2000);
    this.#clock = opts.clock ?? (() => new Date());
    if (opts.dictionary !== undefined) {
      checkDictionary(opts.dictionary);
      // A copy: the caller's buffer changing later cannot change what is sealed.
      this.#dictionary = Uint8Array.from(opts.dictionary);
    }
  }

  /** {@link validate} at the producer's clock, with the producer's dictionary. */
  validate(n: Notification): Validated {
    return validate(n, this.#clock(), this.#dictionary === undefined ? {} : { dictionary: this.#dictionary });
  }

  /**
   * Validates n, seals its message under the intent's dedupe key (one KMS
   * GenerateDataKey call), seals the intent's fields and envelope under the intent key
   * (one KMS GenerateMac call) and sends the intent to the queue. A failed send
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
    const issued = { ...n, issuedAt: v.issuedAt };
    const signal = opts.abortSignal;
    const callOpts = signal === undefined ? {} : { abortSignal: signal };
    const sealOpts = this.#dictionary === undefined ? callOpts : { ...callOpts, dictionary: this.#dictionary };
    let sealed;
    try {
      sealed = await seal(this.#kms, this.#keyId, v.dedupeKey, n.message, sealOpts);
    } catch (err) {
      throw new PublishError('seal', n.challengeId, n.channel, 0, `seal: KMS GenerateDataKey failed: ${describe(err)}`, err);
    }
    // The seal binds the envelope too (its digest): the content is sealed first.
    const binding = intentBinding(issued, v.contentHash, sealed);
    let mac;
    try {
      mac = await signIntent(this.#kms, this.#intentKeyArn, binding, callOpts);
    } catch (err) {
      throw new PublishError('sign', n.challengeId, n.channel, 0, `sign: KMS GenerateMac failed: ${describe(err)}`, err);
    }
    const body = encodeIntent(issued, v.contentHash, sealed, mac);
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


