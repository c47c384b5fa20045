/**
 * Sealing: a fresh AES-256 data key from KMS GenerateDataKey for every
 * message, the canonical plaintext compressed with raw DEFLATE (RFC 1951),
 * AES-256-GCM over that with the dedupe key as AAD, and only the
 * KMS-encrypted copy of the data key kept (envelope version 2). With a
 * preset dictionary, the plaintext is compressed against it and the
 * envelope, version 3, names it (`dict`).
 *
 * @module
 */
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';

import { GenerateDataKeyCommand, type KMSClient } from '@aws-sdk/client-kms';

import { ProducerError } from './errors.js';
import {
  ENVELOPE_VERSION,
  ENVELOPE_VERSION_DICTIONARY,
  MAX_CIPHERTEXT,
  MAX_DICTIONARY,
  MAX_PLAINTEXT,
  type Envelope,
  type Message,
} from './intent.js';

/** The "purpose" entry of the KMS encryption context. */
export const ENCRYPTION_CONTEXT_PURPOSE = 'password-reset-notification';

const NONCE_SIZE = 12;
const MAX_EDK = 6144;
const MAX_KEY_ID = 2048;
const KEY_ID = /^[A-Za-z0-9:/_.-]+$/;

/**
 * The KMS encryption context of a data key for the logical message with
 * dedupe key `key`. The consumer decrypts under the same context.
 */
export function encryptionContext(key: string): Record<string, string> {
  return { purpose: ENCRYPTION_CONTEXT_PURPOSE, dedupe_key: key };
}

/** The GCM additional authenticated data: the ASCII bytes of the hex dedupe key. */
export function aad(key: string): Buffer {
  return Buffer.from(key, 'ascii');
}

const GO_ESCAPES: Record<string, string> = {
  '<': '\\u003c',
  '>': '\\u003e',
  '&': '\\u0026',
  '\u2028': '\\u2028',
  '\u2029': '\\u2029',
};

/**
 * The canonical plaintext of a message: the UTF-8 bytes of the JSON object
 * `{"to":...,"subject":...,"body":...}` in that order, `subject` left out
 * when empty, strings escaped as JSON.stringify does and, in addition, `<`,
 * `>`, `&`, U+2028 and U+2029 as `\u003c`, `\u003e`, `\u0026`, `\u2028`,
 * `\u2029` (what the Go producer writes). The caller should zero the buffer
 * after use.
 */
export function canonicalPlaintext(m: Message): Buffer {
  const obj: Record<string, string> = { to: m.to };
  if (m.subject !== undefined && m.subject !== '') {
    obj['subject'] = m.subject;
  }
  obj['body'] = m.body;
  const json = JSON.stringify(obj).replace(/[<>&\u2028\u2029]/g, (c) => GO_ESCAPES[c] ?? c);
  return Buffer.from(json, 'utf8');
}

/**
 * The id a version 3 envelope names its preset dictionary by (`dict`): the
 * lowercase hex SHA-256 of the dictionary's bytes.
 */
export function dictionaryId(dictionary: Uint8Array): string {
  return createHash('sha256').update(dictionary).digest('hex');
}

/**
 * Checks a preset dictionary: a Uint8Array (a Buffer is one) of 1 to
 * {@link MAX_DICTIONARY} bytes. Throws a TypeError or a RangeError
 * otherwise.
 */
export function checkDictionary(dictionary: unknown): asserts dictionary is Uint8Array {
  if (!(dictionary instanceof Uint8Array)) {
    throw new TypeError('resetledger: dictionary must be a Buffer or Uint8Array');
  }
  if (dictionary.length === 0 || dictionary.length > MAX_DICTIONARY) {
    throw new RangeError(`resetledger: dictionary must be 1 to ${MAX_DICTIONARY} bytes, not ${dictionary.length}`);
  }
}

/**
 * The raw DEFLATE stream (RFC 1951: no zlib or gzip header) of canonical
 * plaintext `pt`, at level 9, against the preset `dictionary` if one is
 * given. Another implementation's stream may differ byte for byte; the
 * consumer inflates any. Throws a RangeError for a plaintext over
 * {@link MAX_PLAINTEXT} or a dictionary {@link checkDictionary} refuses.
 * The caller should zero the result.
 */
export function compress(pt: Uint8Array, dictionary?: Uint8Array): Buffer {
  if (pt.length > MAX_PLAINTEXT) {
    throw new RangeError('plaintext too long');
  }
  if (dictionary === undefined) {
    return deflateRawSync(pt, { level: 9 });
  }
  checkDictionary(dictionary);
  return deflateRawSync(pt, { level: 9, dictionary });
}

/** A data key as GenerateDataKey returns it. */
export interface DataKey {
  /** The 32-byte AES key. Zeroed by {@link seal} after use. */
  plaintext: Uint8Array;
  /** CiphertextBlob: the data key encrypted under the KMS key. */
  ciphertextBlob: Uint8Array;
  /** KeyId: the ARN of the KMS key. */
  keyId: string;
}

/** Thrown when KMS answers with something that cannot be a data key. */
class MalformedDataKeyError extends ProducerError {
  constructor(detail: string) {
    super('ERR_MALFORMED_DATA_KEY', `resetledger: KMS returned a malformed data key: ${detail}`);
  }
}

/**
 * Seals plaintext `pt` for dedupe key `key` with a given data key and nonce:
 * compresses it ({@link compress}, against `dictionary` if given: envelope
 * version 3 naming it) and encrypts the stream.
 * {@link seal} calls it with a fresh data key and a random nonce; the test
 * vectors call it with fixed ones. A data key must never seal twice.
 */
export function sealWith(key: string, pt: Uint8Array, dataKey: DataKey, nonce: Uint8Array, dictionary?: Uint8Array): Envelope {
  if (dictionary !== undefined) {
    checkDictionary(dictionary);
  }
  if (dataKey.plaintext.length !== 32) {
    throw new MalformedDataKeyError('want 32 bytes');
  }
  if (dataKey.ciphertextBlob.length === 0 || dataKey.ciphertextBlob.length > MAX_EDK) {
    throw new MalformedDataKeyError('ciphertext blob missing or too long');
  }
  if (dataKey.keyId.length > MAX_KEY_ID || !KEY_ID.test(dataKey.keyId)) {
    throw new MalformedDataKeyError('key id missing, too long or with a character outside [A-Za-z0-9:/_.-]');
  }
  if (nonce.length !== NONCE_SIZE) {
    throw new RangeError('nonce: want 12 bytes');
  }
  const z = compress(pt, dictionary);
  const cipher = createCipheriv('aes-256-gcm', dataKey.plaintext, nonce);
  cipher.setAAD(aad(key));
  const ct = Buffer.concat([cipher.update(z), cipher.final(), cipher.getAuthTag()]);
  z.fill(0);
  if (ct.length > MAX_CIPHERTEXT) {
    throw new RangeError('ciphertext too long');
  }
  return {
    v: dictionary === undefined ? ENVELOPE_VERSION : ENVELOPE_VERSION_DICTIONARY,
    alg: 'AES-256-GCM',
    kms_key_id: dataKey.keyId,
    ...(dictionary === undefined ? {} : { dict: dictionaryId(dictionary) }),
    edk: Buffer.from(dataKey.ciphertextBlob).toString('base64'),
    nonce: Buffer.from(nonce).toString('base64'),
    ct: ct.toString('base64'),
  };
}

/** The KMS call {@link seal} makes; a KMSClient is one. */
export type DataKeyClient = Pick<KMSClient, 'send'>;

/** Options of {@link seal}. */
export interface SealOptions {
  /** Aborts the GenerateDataKey call. */
  abortSignal?: AbortSignal;
  /**
   * The preset DEFLATE dictionary to compress against (1 to
   * {@link MAX_DICTIONARY} bytes): the envelope is then version 3 and names
   * it. The stack must hold the same bytes. Without it, version 2.
   */
  dictionary?: Uint8Array;
}

/**
 * Seals message `m` for the logical message with dedupe key `key` under a
 * fresh data key of KMS key `keyId` (an ARN, key id or alias; the envelope
 * records the ARN KMS returns). The plaintext data key and the plaintext
 * are zeroed before it returns. Validate the message first
 * ({@link validateMessage}): this function trusts it.
 */
export async function seal(kms: DataKeyClient, keyId: string, key: string, m: Message, opts: SealOptions = {}): Promise<Envelope> {
  const dictionary = opts.dictionary;
  if (dictionary !== undefined) {
    // Refused before the KMS call: no data key is spent on it.
    checkDictionary(dictionary);
  }
  const pt = canonicalPlaintext(m);
  try {
    const out = await kms.send(
      new GenerateDataKeyCommand({ KeyId: keyId, KeySpec: 'AES_256', EncryptionContext: encryptionContext(key) }),
      opts.abortSignal === undefined ? {} : { abortSignal: opts.abortSignal },
    );
    const plain = out.Plaintext ?? new Uint8Array();
    try {
      return sealWith(
        key,
        pt,
        { plaintext: plain, ciphertextBlob: out.CiphertextBlob ?? new Uint8Array(), keyId: out.KeyId || keyId },
        randomBytes(NONCE_SIZE),
        dictionary,
      );
    } finally {
      plain.fill(0);
    }
  } finally {
    pt.fill(0);
  }
}
