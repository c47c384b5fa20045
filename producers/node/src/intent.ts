/**
 * The intent: its fields and their rules, the dedupe key, the content hash
 * and the wire encoding. docs/intent-v1.md in the resetledger repository is
 * the specification; testdata/vectors holds the vectors this module is
 * tested against.
 *
 * @module
 */
import { createHash } from 'node:crypto';

import { IntentError } from './errors.js';

/** The channels an intent can name. */
export type Channel = 'email' | 'sms';

/** The supported channels. */
export const CHANNELS: readonly Channel[] = Object.freeze(['email', 'sms']);

/**
 * How the channels of one challenge relate: `single` (this channel only),
 * `dual` (independent claims per channel, both sent) or `fallback` (the next
 * channel of `order` is sent only after the previous one was rejected).
 */
export type WorkflowKind = 'single' | 'dual' | 'fallback';

/** The channel plan of a challenge. `order` is required for `fallback`. */
export interface Workflow {
  kind: WorkflowKind;
  order?: readonly Channel[];
}

/**
 * The secret-bearing content: the real address (an email address or an
 * E.164 phone number), the subject (email only; leave it out or empty for
 * SMS) and the rendered body with the reset link. It leaves the process only
 * sealed.
 */
export interface Message {
  to: string;
  subject?: string;
  body: string;
}

/** One password-reset notification on one channel. */
export interface Notification {
  /** Opaque id of the reset challenge: 1 to 128 of `A-Za-z0-9._:-`. Part of the dedupe key. */
  challengeId: string;
  /** Part of the dedupe key. */
  channel: Channel;
  workflow: Workflow;
  /** Opaque reference to the address (1 to 256 of `A-Za-z0-9._:-`), never the address itself. */
  destinationRef: string;
  /**
   * Optional opaque reference to the account the challenge is for (the
   * rules of `destinationRef`), never an address: the intent's `subject_ref`.
   * Left out, or `''`, the intent carries no `subject_ref`.
   */
  subjectRef?: string;
  /** When the challenge expires. Nothing is sent after it. */
  expiresAt: Date;
  /** 1 to 64 of `A-Za-z0-9._:-`. */
  templateId: string;
  /** 1 to 32 of `A-Za-z0-9._:-`. Recorded in the content hash, never in the dedupe key. */
  templateVersion: string;
  /** 1 to 32 of `A-Za-z0-9._:-`. */
  policyVersion: string;
  message: Message;
}

/** The only purpose. */
export const PURPOSE = 'password-reset';

/** The only schema_version. */
export const SCHEMA_VERSION = 1;

/** The largest intent body the consumer accepts, in bytes (64 KiB). */
export const MAX_BODY_SIZE = 64 * 1024;

/** The largest envelope ciphertext (ct) the consumer accepts, in bytes. */
export const MAX_CIPHERTEXT = 64 * 1024;

const CONTENT_HASH_DOMAIN = 'reset-notification-content-v1';
const OPAQUE = /^[A-Za-z0-9._:-]*$/;
const OPAQUE_CLASS = '[A-Za-z0-9._:-]';

/**
 * The dedupe key of a logical message: the hex SHA-256 of
 * `password-reset:<challengeId>:<channel>`. It is also the idempotency key
 * of every send and the GCM AAD of the sealed content.
 */
export function dedupeKey(challengeId: string, channel: Channel): string {
  return createHash('sha256').update(`${PURPOSE}:${challengeId}:${channel}`, 'utf8').digest('hex');
}

/**
 * The content hash binding a rendered message to its template: the hex
 * SHA-256 of the domain string and the fields template id, template
 * version, to, subject (empty when absent) and body, each preceded by its
 * UTF-8 length as 8 bytes big-endian.
 */
export function contentHash(templateId: string, templateVersion: string, message: Message): string {
  const h = createHash('sha256');
  for (const f of [CONTENT_HASH_DOMAIN, templateId, templateVersion, message.to, message.subject ?? '', message.body]) {
    const b = Buffer.from(f, 'utf8');
    const len = Buffer.alloc(8);
    len.writeBigUInt64BE(BigInt(b.length));
    h.update(len).update(b);
  }
  return h.digest('hex');
}

function checkOpaque(field: string, v: unknown, max: number): void {
  if (v === undefined || v === null || v === '') {
    throw new IntentError(field, 'missing');
  }
  if (typeof v !== 'string') {
    throw new IntentError(field, 'want a string');
  }
  if (v.length > max) {
    throw new IntentError(field, 'too long');
  }
  if (!OPAQUE.test(v)) {
    throw new IntentError(field, `contains a character outside ${OPAQUE_CLASS}`);
  }
}

/** Whether n names a subject: `subjectRef` undefined, null or `''` is none. */
function hasSubjectRef(n: Notification): boolean {
  const s: unknown = n.subjectRef;
  return s !== undefined && s !== null && s !== '';
}

function isChannel(c: unknown): c is Channel {
  return c === 'email' || c === 'sms';
}

/**
 * Checks the intent fields of n (not the message) in the order the Go
 * implementation does and throws an {@link IntentError} for the first bad
 * one.
 */
export function validateIntentFields(n: Notification): void {
  if (n === null || typeof n !== 'object') {
    throw new IntentError('body', 'not an object');
  }
  checkOpaque('challenge_id', n.challengeId, 128);
  if (!isChannel(n.channel)) {
    throw new IntentError('channel', 'unknown channel (want email or sms)');
  }
  const wf: Partial<Workflow> = n.workflow ?? {};
  const order: unknown = wf.order;
  const seen = new Set<Channel>();
  if (order !== undefined && order !== null) {
    if (!Array.isArray(order)) {
      throw new IntentError('workflow.order', 'want an array of channels');
    }
    for (const c of order) {
      if (!isChannel(c) || seen.has(c)) {
        throw new IntentError('workflow.order', 'unknown or repeated channel');
      }
      seen.add(c);
    }
  }
  switch (wf.kind) {
    case 'single':
    case 'dual':
      break;
    case 'fallback':
      if (seen.size < 2 || seen.size > CHANNELS.length) {
        throw new IntentError('workflow.order', 'fallback needs 2 distinct channels');
      }
      if (!seen.has(n.channel)) {
        throw new IntentError('workflow.order', "does not contain the intent's channel");
      }
      break;
    default:
      throw new IntentError('workflow.kind', 'unknown workflow (want single, dual or fallback)');
  }
  checkOpaque('destination_ref', n.destinationRef, 256);
  if (hasSubjectRef(n)) {
    checkOpaque('subject_ref', n.subjectRef, 256);
  }
  const exp: unknown = n.expiresAt;
  if (exp === undefined || exp === null) {
    throw new IntentError('expires_at', 'missing');
  }
  if (!(exp instanceof Date) || Number.isNaN(exp.getTime())) {
    throw new IntentError('expires_at', 'want a valid Date');
  }
  const year = exp.getUTCFullYear();
  if (year < 1 || year > 9999) {
    throw new IntentError('expires_at', 'year outside 0001..9999');
  }
  checkOpaque('template_id', n.templateId, 64);
  checkOpaque('template_version', n.templateVersion, 32);
  checkOpaque('policy_version', n.policyVersion, 32);
}

/**
 * Checks the message of n: an address and a body, and every field a
 * well-formed Unicode string (a lone surrogate cannot be sealed as the
 * content hash reads it).
 */
export function validateMessage(m: Message): void {
  if (m === null || typeof m !== 'object') {
    throw new IntentError('message', 'missing');
  }
  for (const name of ['to', 'subject', 'body'] as const) {
    const v: unknown = m[name];
    if (name !== 'subject' && (v === undefined || v === null || v === '')) {
      throw new IntentError(`message.${name}`, 'missing');
    }
    if (v === undefined || v === null) {
      continue;
    }
    if (typeof v !== 'string') {
      throw new IntentError(`message.${name}`, 'want a string');
    }
    if (!v.isWellFormed()) {
      throw new IntentError(`message.${name}`, 'not valid UTF-8');
    }
  }
}

/**
 * Formats t as the wire's expires_at: RFC 3339 in UTC with the fraction of
 * the second trimmed of trailing zeros (none when whole), as Go's
 * time.RFC3339Nano does.
 */
export function formatTime(t: Date): string {
  const iso = t.toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  const whole = iso.slice(0, 19);
  const frac = iso.slice(20, 23).replace(/0+$/, '');
  return frac === '' ? `${whole}Z` : `${whole}.${frac}Z`;
}

/** The sealed content as it travels in the intent. */
export interface Envelope {
  v: 1;
  alg: 'AES-256-GCM';
  /** The KeyId GenerateDataKey returned: the KMS key's ARN. */
  kms_key_id: string;
  /** CiphertextBlob of GenerateDataKey, standard padded base64. */
  edk: string;
  /** The 12-byte GCM nonce, standard padded base64. */
  nonce: string;
  /** GCM ciphertext followed by its 16-byte tag, standard padded base64. */
  ct: string;
}

/**
 * The intent body on the wire for n with its content hash and sealed
 * content: one JSON object, fields in the documented order, byte for byte
 * what the Go producer writes.
 */
export function encodeIntent(n: Notification, hash: string, sealed: Envelope): string {
  const workflow: { kind: WorkflowKind; order?: Channel[] } = { kind: n.workflow.kind };
  if (n.workflow.order !== undefined && n.workflow.order.length > 0) {
    workflow.order = [...n.workflow.order];
  }
  return JSON.stringify({
    schema_version: SCHEMA_VERSION,
    purpose: PURPOSE,
    challenge_id: n.challengeId,
    channel: n.channel,
    workflow,
    destination_ref: n.destinationRef,
    ...(hasSubjectRef(n) ? { subject_ref: n.subjectRef } : {}),
    expires_at: formatTime(n.expiresAt),
    template_id: n.templateId,
    template_version: n.templateVersion,
    policy_version: n.policyVersion,
    content_hash: hash,
    sealed_content: {
      v: sealed.v,
      alg: sealed.alg,
      kms_key_id: sealed.kms_key_id,
      edk: sealed.edk,
      nonce: sealed.nonce,
      ct: sealed.ct,
    },
  });
}
