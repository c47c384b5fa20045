/**
 * The intent: its fields and their rules, the dedupe key, the content hash,
 * the envelope's digest, the binding the intent key seals and the wire
 * encoding (version 3).
 * docs/intent-v2.md and schema/intent-v3.schema.json in the resetledger
 * repository are the specification; testdata/vectors holds the vectors this
 * module is tested against.
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
  /**
   * When the account service issued the challenge: a subject's newest
   * challenge is the one issued last, whatever the expiries. Optional: left
   * out (or null), the producer's clock at publish. It must be before
   * `expiresAt` and no later than the claim function's clock (which refuses
   * the intent otherwise). Sealed with the rest of the intent.
   */
  issuedAt?: Date;
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

/** The schema_version this package writes: 3, every decision field and the envelope sealed by intent_mac. */
export const SCHEMA_VERSION = 3;

/** The largest intent body the consumer accepts, in bytes (64 KiB). */
export const MAX_BODY_SIZE = 64 * 1024;

/** The largest envelope ciphertext (ct) the consumer accepts, in bytes. */
export const MAX_CIPHERTEXT = 64 * 1024;

/**
 * The largest canonical plaintext (before compression) a message may have,
 * in bytes: the consumer stops inflating past it.
 */
export const MAX_PLAINTEXT = MAX_CIPHERTEXT - 16;

/** The envelope version this package writes without a dictionary: raw DEFLATE, then AES-256-GCM. */
export const ENVELOPE_VERSION = 2;

/**
 * The envelope version this package writes with a preset dictionary: raw
 * DEFLATE against the dictionary, which the envelope names (`dict`), then
 * AES-256-GCM.
 */
export const ENVELOPE_VERSION_DICTIONARY = 3;

/**
 * The longest preset dictionary, in bytes: DEFLATE's window, the most of a
 * dictionary a stream can refer back to.
 */
export const MAX_DICTIONARY = 32 * 1024;

/** The length of every intent_mac: 32 bytes in base64url without padding. */
export const INTENT_MAC_LENGTH = 43;

/** The first line of every binding: it names the layout and separates intent seals from any other use of the key. */
export const BINDING_DOMAIN = 'resetledger-intent-binding/v3';

/** The first line of an envelope's digest preimage ({@link envelopeDigestPreimage}). */
export const ENVELOPE_DIGEST_DOMAIN = 'resetledger-intent-envelope/v1';

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
  checkTime('expires_at', exp);
  checkOpaque('template_id', n.templateId, 64);
  checkOpaque('template_version', n.templateVersion, 32);
  checkOpaque('policy_version', n.policyVersion, 32);
}

/** Throws unless t is a valid Date RFC 3339 can carry. */
function checkTime(field: string, t: unknown): asserts t is Date {
  if (!(t instanceof Date) || Number.isNaN(t.getTime())) {
    throw new IntentError(field, 'want a valid Date');
  }
  const year = t.getUTCFullYear();
  if (year < 1 || year > 9999) {
    throw new IntentError(field, 'year outside 0001..9999');
  }
}

/**
 * The issued_at an intent for n carries: `n.issuedAt`, or `now` when n has
 * none. Throws an {@link IntentError} on `issued_at` unless it is a valid
 * Date before `n.expiresAt` (which {@link validateIntentFields} checked).
 * The Go producer checks it after the expiry, as {@link validate} does.
 */
export function issuedAtOf(n: Notification, now: Date): Date {
  const given: unknown = n.issuedAt;
  const t = given === undefined || given === null ? now : given;
  checkTime('issued_at', t);
  if (t.getTime() >= n.expiresAt.getTime()) {
    throw new IntentError('issued_at', 'not before expires_at');
  }
  return t;
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
 * Formats t as the wire's issued_at and expires_at: RFC 3339 in UTC with the fraction of
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
  /**
   * 2: the GCM plaintext is the raw DEFLATE stream of the canonical
   * plaintext; 3: the same, compressed against the preset dictionary `dict`
   * names.
   */
  v: 2 | 3;
  alg: 'AES-256-GCM';
  /** The KeyId GenerateDataKey returned: the KMS key's ARN. */
  kms_key_id: string;
  /**
   * Version 3 only (and required there): the preset dictionary's id, the
   * lowercase hex SHA-256 of its bytes.
   */
  dict?: string;
  /** CiphertextBlob of GenerateDataKey, standard padded base64. */
  edk: string;
  /** The 12-byte GCM nonce, standard padded base64. */
  nonce: string;
  /** GCM ciphertext followed by its 16-byte tag, standard padded base64. */
  ct: string;
}

/** n with the issued_at it is published with (see {@link issuedAtOf}). */
export type Issued = Notification & { issuedAt: Date };

function requireIssued(n: Notification): asserts n is Issued {
  const t: unknown = n.issuedAt;
  if (t === undefined || t === null) {
    throw new IntentError('issued_at', 'missing');
  }
  checkTime('issued_at', t);
}

/** The lines `<name>:<length>:<value>\n` after `domain` and a line feed, lengths in UTF-8 bytes. */
function lines(domain: string, fields: readonly (readonly [string, string])[]): string {
  let text = `${domain}\n`;
  for (const [name, value] of fields) {
    text += `${name}:${Buffer.byteLength(value, 'utf8')}:${value}\n`;
  }
  return text;
}

/**
 * The canonical encoding of envelope e that {@link envelopeDigest} hashes:
 * {@link ENVELOPE_DIGEST_DOMAIN} and a line feed, then for v, alg,
 * kms_key_id, dict (version 3 only), edk, nonce and ct, in that order, a
 * line `<name>:<length>:<value>\n`, each value as the intent carries it (v
 * in decimal, the base64 members as written).
 */
export function envelopeDigestPreimage(e: Envelope): Buffer {
  return Buffer.from(lines(ENVELOPE_DIGEST_DOMAIN, [
    ['v', String(e.v)], ['alg', e.alg], ['kms_key_id', e.kms_key_id],
    ...(e.v === ENVELOPE_VERSION_DICTIONARY ? [['dict', e.dict ?? ''] as const] : []),
    ['edk', e.edk], ['nonce', e.nonce], ['ct', e.ct],
  ]), 'utf8');
}

/** The hex SHA-256 of {@link envelopeDigestPreimage}: the binding's `envelope` field. */
export function envelopeDigest(e: Envelope): string {
  return createHash('sha256').update(envelopeDigestPreimage(e)).digest('hex');
}

/**
 * The binding of the intent for n with its content hash and sealed
 * content: the bytes the intent key seals (KMS GenerateMac, HMAC_SHA_256)
 * into intent_mac, every field the claim function decides on and the
 * envelope. {@link BINDING_DOMAIN} and a line feed, then for each field in
 * the documented order a line `<name>:<length>:<value>\n`, the length the
 * value's UTF-8 byte count in decimal, the value as the wire carries it
 * (the times as {@link formatTime} writes them, workflow.order joined by
 * commas, subject_ref and workflow.order empty when absent), and last
 * `envelope`, the {@link envelopeDigest} of sealed. n must carry its
 * issuedAt.
 */
export function intentBinding(n: Notification, hash: string, sealed: Envelope): Buffer {
  requireIssued(n);
  const fields: [string, string][] = [
    ['schema_version', String(SCHEMA_VERSION)],
    ['purpose', PURPOSE],
    ['challenge_id', n.challengeId],
    ['channel', n.channel],
    ['dedupe_key', dedupeKey(n.challengeId, n.channel)],
    ['workflow.kind', n.workflow.kind],
    ['workflow.order', (n.workflow.order ?? []).join(',')],
    ['destination_ref', n.destinationRef],
    ['subject_ref', hasSubjectRef(n) ? (n.subjectRef as string) : ''],
    ['issued_at', formatTime(n.issuedAt)],
    ['expires_at', formatTime(n.expiresAt)],
    ['template_id', n.templateId],
    ['template_version', n.templateVersion],
    ['policy_version', n.policyVersion],
    ['content_hash', hash],
    ['envelope', envelopeDigest(sealed)],
  ];
  return Buffer.from(lines(BINDING_DOMAIN, fields), 'utf8');
}

/**
 * The intent body on the wire for n (which must carry its issuedAt) with
 * its content hash, sealed content and intent_mac: one JSON object, fields
 * in the documented order, byte for byte what the Go producer writes.
 */
export function encodeIntent(n: Notification, hash: string, sealed: Envelope, intentMac: string): string {
  requireIssued(n);
  if (typeof intentMac !== 'string' || intentMac === '') {
    throw new IntentError('intent_mac', 'empty');
  }
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
    issued_at: formatTime(n.issuedAt),
    expires_at: formatTime(n.expiresAt),
    template_id: n.templateId,
    template_version: n.templateVersion,
    policy_version: n.policyVersion,
    content_hash: hash,
    sealed_content: {
      v: sealed.v,
      alg: sealed.alg,
      kms_key_id: sealed.kms_key_id,
      ...(sealed.v === ENVELOPE_VERSION_DICTIONARY ? { dict: sealed.dict ?? '' } : {}),
      edk: sealed.edk,
      nonce: sealed.nonce,
      ct: sealed.ct,
    },
    intent_mac: intentMac,
  });
}
