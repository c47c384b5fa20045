/**
 * The intent's seal: KMS GenerateMac (HMAC_SHA_256) under the stack's
 * intent key over the intent's binding ({@link intentBinding}), written as
 * intent_mac. The claim function verifies it (VerifyMac) before any row
 * exists, so an intent replayed with another expiry, subject, destination,
 * workflow or template is refused.
 *
 * @module
 */
import { GenerateMacCommand, type KMSClient } from '@aws-sdk/client-kms';

import { ProducerError } from './errors.js';

/** The MAC algorithm of every seal. */
export const MAC_ALGORITHM = 'HMAC_SHA_256';

/** The longest binding KMS GenerateMac takes, in bytes. */
export const MAX_BINDING = 4096;

const MAC_SIZE = 32;

/** The KMS call {@link signIntent} makes; a KMSClient is one. */
export type MacClient = Pick<KMSClient, 'send'>;

/** Options of {@link signIntent}. */
export interface SignOptions {
  /** Aborts the GenerateMac call. */
  abortSignal?: AbortSignal;
}

/** Thrown when KMS answers GenerateMac with something that is not an HMAC-SHA-256. */
class MalformedMacError extends ProducerError {
  constructor(length: number) {
    super('ERR_MALFORMED_MAC', `resetledger: KMS returned a ${length}-byte MAC (want ${MAC_SIZE})`);
  }
}

/** A MAC as intent_mac carries it: base64url without padding (43 characters). */
export function encodeMac(mac: Uint8Array): string {
  return Buffer.from(mac).toString('base64url');
}

/**
 * Asks KMS for the seal of `binding` under the intent key `keyId` (the
 * stack output IntentKeyArn) and returns it as intent_mac.
 */
export async function signIntent(kms: MacClient, keyId: string, binding: Uint8Array, opts: SignOptions = {}): Promise<string> {
  if (binding.length === 0 || binding.length > MAX_BINDING) {
    throw new RangeError(`binding of ${binding.length} bytes (want 1 to ${MAX_BINDING})`);
  }
  const out = await kms.send(
    new GenerateMacCommand({ KeyId: keyId, MacAlgorithm: MAC_ALGORITHM, Message: binding }),
    opts.abortSignal === undefined ? {} : { abortSignal: opts.abortSignal },
  );
  const mac = out.Mac ?? new Uint8Array();
  if (mac.length !== MAC_SIZE) {
    throw new MalformedMacError(mac.length);
  }
  return encodeMac(mac);
}
