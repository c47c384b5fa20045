/**
 * The errors the producer throws. None of them carries the message, the
 * address or the reset link: not in `message`, not in `stack`, not in any
 * property. Log them as they are.
 *
 * @module
 */

/** Base class of every error the producer throws on purpose. */
export class ProducerError extends Error {
  /** A stable, machine-readable code (`ERR_...`). */
  readonly code: string;

  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/**
 * The notification is not a valid intent: nothing was sealed or sent, and
 * publishing it again cannot help. `field` names the intent field as the
 * wire format and the consumer name it (`channel`, `workflow.order`,
 * `destination_ref`, `message.body`, ...); `reason` says what is wrong
 * without quoting the value.
 */
export class IntentError extends ProducerError {
  readonly field: string;
  readonly reason: string;

  constructor(field: string, reason: string) {
    super('ERR_INVALID_INTENT', `resetledger: invalid intent: ${field}: ${reason}`);
    this.field = field;
    this.reason = reason;
  }
}

/**
 * The challenge expired before the intent could be published: nothing was
 * sent (or, after a failed attempt, nothing more will be tried). The
 * consumer would record it expired without sending anything anyway.
 */
export class ExpiredError extends ProducerError {
  readonly challengeId: string;
  readonly channel: string;

  constructor(challengeId: string, channel: string, detail = 'challenge already expired') {
    super('ERR_CHALLENGE_EXPIRED', `resetledger: publish ${challengeId}/${channel}: ${detail}`);
    this.challengeId = challengeId;
    this.channel = channel;
  }
}

/**
 * Where a publish failed: sealing the content (KMS GenerateDataKey), sealing
 * the intent's fields (KMS GenerateMac) or sending (SQS SendMessage).
 */
export type PublishStage = 'seal' | 'sign' | 'send';

/**
 * An AWS call failed. `stage` says which; `attempts` how many SendMessage
 * calls were made (0 when sealing or signing failed); `cause` is the SDK's
 * error (it can hold no secret: KMS never sees the message, and SQS sees
 * only the sealed intent). Publishing the same notification again is safe: the
 * ledger deduplicates by the intent's dedupe key.
 */
export class PublishError extends ProducerError {
  readonly stage: PublishStage;
  readonly attempts: number;
  readonly challengeId: string;
  readonly channel: string;

  constructor(stage: PublishStage, challengeId: string, channel: string, attempts: number, detail: string, cause?: unknown) {
    super('ERR_PUBLISH', `resetledger: publish ${challengeId}/${channel}: ${detail}`, cause === undefined ? undefined : { cause });
    this.stage = stage;
    this.attempts = attempts;
    this.challengeId = challengeId;
    this.channel = channel;
  }
}
