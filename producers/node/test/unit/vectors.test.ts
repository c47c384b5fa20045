// The package against the cross-language vectors of testdata/vectors, which
// the Go tests generate from the Go implementation and check.
import assert from 'node:assert/strict';
import { createDecipheriv, createHash } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { describe, test } from 'node:test';

import {
  aad,
  canonicalPlaintext,
  contentHash,
  dedupeKey,
  encodeIntent,
  encodeMac,
  encryptionContext,
  envelopeDigest,
  envelopeDigestPreimage,
  ExpiredError,
  formatTime,
  intentBinding,
  IntentError,
  Producer,
  validate,
  type Envelope,
} from '@resetledger/producer';

import { sealWith } from '../../dist/envelope.js';
import { FakeKMS, FakeSQS, loadVectors, notification, writeVectors, type IntentVector, type VectorNotification } from './fixtures.js';


interface InvalidVector {
  name: string;
  notification: VectorNotification;
  want: { error: 'invalid_intent' | 'expired'; field?: string; reason?: string };
}

const intents = loadVectors<{ vectors: IntentVector[] }>('intents.json').vectors;
const invalid = loadVectors<{ now: string; vectors: InvalidVector[] }>('invalid.json');

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

describe('intents.json', () => {
  test('has vectors', () => assert.ok(intents.length >= 8));
  for (const v of intents) {
    describe(v.name, () => {
      const n = notification(v.notification);
      const dataKey = {
        plaintext: Buffer.from(v.generate_data_key.Plaintext_hex, 'hex'),
        blob: Buffer.from(v.generate_data_key.CiphertextBlob_base64, 'base64'),
        keyId: v.generate_data_key.KeyId,
      };

      test('dedupe key', () => {
        assert.equal(sha256(v.dedupe_key_preimage), v.dedupe_key);
        assert.equal(dedupeKey(n.challengeId, n.channel), v.dedupe_key);
      });

      test('content hash', () => {
        assert.equal(sha256(Buffer.from(v.content_hash_preimage_hex, 'hex')), v.content_hash);
        assert.equal(contentHash(n.templateId, n.templateVersion, n.message), v.content_hash);
      });

      const mac = { mac: Buffer.from(v.generate_mac.Mac_base64, 'base64'), keyId: v.generate_mac.KeyId };

      test('validate returns the key, the hash and the issued_at', () => {
        const now = new Date(n.expiresAt.getTime() - 60_000);
        assert.ok(n.issuedAt instanceof Date);
        assert.deepEqual(validate(n, now), { dedupeKey: v.dedupe_key, contentHash: v.content_hash, issuedAt: n.issuedAt });
        assert.equal(formatTime(n.issuedAt), JSON.parse(v.body).issued_at);
      });

      test('envelope digest', () => {
        const pre = envelopeDigestPreimage(v.sealed_content);
        assert.ok(Buffer.isBuffer(pre));
        assert.equal(pre.toString('utf8'), v.envelope_preimage);
        assert.equal(sha256(pre), v.envelope);
        assert.equal(envelopeDigest(v.sealed_content), v.envelope);
      });

      test('binding', () => {
        const b = intentBinding(n, v.content_hash, v.sealed_content);
        assert.ok(Buffer.isBuffer(b));
        assert.equal(b.toString('utf8'), v.binding);
        assert.deepEqual(b, Buffer.from(v.binding, 'utf8'));
      });

      test('intent_mac: the MAC in base64url without padding', () => {
        assert.equal(v.generate_mac.MacAlgorithm, 'HMAC_SHA_256');
        assert.equal(encodeMac(mac.mac), v.intent_mac);
        assert.match(v.intent_mac, /^[A-Za-z0-9_-]{43}$/);
      });

      test('canonical plaintext, AAD, encryption context', () => {
        const pt = canonicalPlaintext(n.message);
        assert.equal(pt.toString('hex'), v.plaintext_hex);
        assert.equal(pt.toString('utf8'), v.plaintext);
        assert.equal(aad(v.dedupe_key).toString('hex'), v.aad_hex);
        assert.deepEqual(encryptionContext(v.dedupe_key), v.encryption_context);
      });

      test('envelope with the fixed data key and nonce', () => {
        const env = sealWith(
          v.dedupe_key,
          canonicalPlaintext(n.message),
          { plaintext: dataKey.plaintext, ciphertextBlob: dataKey.blob, keyId: dataKey.keyId },
          Buffer.from(v.nonce_hex, 'hex'),
        );
        // Every member but ct is the vector's byte for byte; ct differs where
        // zlib's DEFLATE stream differs from Go's (docs/intent-v2.md).
        assert.deepEqual({ ...env, ct: '' }, { ...v.sealed_content, ct: '' });
        assert.equal(env.v, 2);
        // Ours opens, with node:crypto and node:zlib alone, to the plaintext.
        assert.equal(openWith(dataKey.plaintext, v.dedupe_key, env), v.plaintext);
        // And so does the Go producer's (the vector's), whose stream is deflate_hex.
        assert.equal(openWith(dataKey.plaintext, v.dedupe_key, v.sealed_content), v.plaintext);
        assert.equal(inflateRawSync(Buffer.from(v.deflate_hex, 'hex')).toString('utf8'), v.plaintext);
      });

      test('intent body', () => {
        assert.equal(encodeIntent(n, v.content_hash, v.sealed_content, v.intent_mac), v.body);
      });

      test('publish: one data key, one MAC over the binding, the same body up to the random nonce', async () => {
        const kms = new FakeKMS(dataKey, undefined, mac);
        const sqs = new FakeSQS();
        const p = new Producer({
          queueUrl: 'https://sqs.test/intents', keyId: 'alias/reset-content', intentKeyArn: 'alias/reset-intent',
          kms: kms.client(), sqs: sqs.client(), clock: () => new Date(n.expiresAt.getTime() - 60_000),
        });
        const res = await p.publish(n);
        assert.deepEqual(res, { dedupeKey: v.dedupe_key, contentHash: v.content_hash, issuedAt: n.issuedAt, messageId: 'msg-1', attempts: 1 });
        assert.deepEqual(kms.inputs, [{ KeyId: 'alias/reset-content', KeySpec: 'AES_256', EncryptionContext: v.encryption_context }]);
        assert.equal(kms.calls, 2);
        assert.deepEqual(sqs.queueUrls, ['https://sqs.test/intents']);
        const body = sqs.bodies[0] ?? '';
        const sent = JSON.parse(body) as { sealed_content: Envelope };
        // The MAC is over the binding of the envelope sent: the vector's
        // binding but for its last line, the digest of this envelope.
        const binding = intentBinding(n, v.content_hash, sent.sealed_content);
        assert.deepEqual(kms.macInputs, [{ KeyId: 'alias/reset-intent', MacAlgorithm: v.generate_mac.MacAlgorithm, Message: binding }]);
        assert.equal(binding.toString('utf8'), v.binding.replace(`envelope:64:${v.envelope}\n`, `envelope:64:${envelopeDigest(sent.sealed_content)}\n`));
        assert.notEqual(envelopeDigest(sent.sealed_content), v.envelope);
        const want = JSON.parse(v.body) as { sealed_content: Envelope };
        assert.notEqual(sent.sealed_content.nonce, want.sealed_content.nonce, 'the nonce is random');
        const nonce = Buffer.from(sent.sealed_content.nonce, 'base64');
        const reSealed = sealWith(v.dedupe_key, canonicalPlaintext(n.message),
          { plaintext: dataKey.plaintext, ciphertextBlob: dataKey.blob, keyId: dataKey.keyId }, nonce);
        assert.deepEqual(sent.sealed_content, reSealed);
        // Byte for byte the vector's body, but for the sealed content's random nonce (and so its ciphertext).
        assert.equal(body.replace(JSON.stringify(reSealed), JSON.stringify(v.sealed_content)), v.body);
        assert.ok(kms.handed.every((k) => k.every((b) => b === 0)), 'the plaintext data key is zeroed');
      });
    });
  }
});

/**
 * Opens envelope `e` (version 2) with the data key: AES-256-GCM with the
 * dedupe key as AAD, then raw inflate, as the consumer does.
 */
function openWith(dataKey: Uint8Array, dedupeKey: string, e: Envelope): string {
  const ct = Buffer.from(e.ct, 'base64');
  const d = createDecipheriv('aes-256-gcm', dataKey, Buffer.from(e.nonce, 'base64'));
  d.setAAD(Buffer.from(dedupeKey, 'ascii'));
  d.setAuthTag(ct.subarray(ct.length - 16));
  return inflateRawSync(Buffer.concat([d.update(ct.subarray(0, ct.length - 16)), d.final()])).toString('utf8');
}

/**
 * foreign/node.json: this producer's envelope for every vector of
 * intents.json, sealed with the vector's data key and nonce. The Go tests
 * open each with the Go opener (docs/intent-v2.md §1.10); here the file
 * must be what this producer writes today (VECTORS_UPDATE=1 rewrites it).
 */
describe('foreign/node.json', () => {
  test('is what this producer seals', () => {
    const sealed = intents.map((v) => ({
      name: v.name,
      sealed_content: sealWith(
        v.dedupe_key,
        canonicalPlaintext(notification(v.notification).message),
        {
          plaintext: Buffer.from(v.generate_data_key.Plaintext_hex, 'hex'),
          ciphertextBlob: Buffer.from(v.generate_data_key.CiphertextBlob_base64, 'base64'),
          keyId: v.generate_data_key.KeyId,
        },
        Buffer.from(v.nonce_hex, 'hex'),
      ),
    }));
    const doc = { producer: 'node', zlib: process.versions.zlib, vectors: sealed };
    if (process.env['VECTORS_UPDATE'] === '1') {
      writeVectors('foreign/node.json', `${JSON.stringify(doc, null, 2)}\n`);
    }
    // Byte for byte only with the zlib that wrote the file: another zlib
    // may write another, equally valid, stream.
    const file = loadVectors<{ zlib: string; vectors: unknown[] }>('foreign/node.json');
    if (file.zlib === process.versions.zlib) {
      assert.deepEqual(file.vectors, sealed);
    }
  });
});

describe('invalid.json', () => {
  const now = new Date(invalid.now);
  test('has vectors', () => assert.ok(invalid.vectors.length >= 20));
  for (const v of invalid.vectors) {
    test(v.name, async () => {
      const kms = new FakeKMS({ plaintext: new Uint8Array(32), blob: new Uint8Array(1), keyId: 'k' });
      const sqs = new FakeSQS();
      const p = new Producer({ queueUrl: 'https://sqs.test/intents', keyId: 'k', intentKeyArn: 'i', kms: kms.client(), sqs: sqs.client(), clock: () => now });
      const n = notification(v.notification);
      await assert.rejects(p.publish(n), (err: unknown) => {
        if (v.want.error === 'expired') {
          assert.ok(err instanceof ExpiredError, `want ExpiredError, got ${String(err)}`);
          assert.equal(err.code, 'ERR_CHALLENGE_EXPIRED');
        } else {
          assert.ok(err instanceof IntentError, `want IntentError, got ${String(err)}`);
          assert.equal(err.code, 'ERR_INVALID_INTENT');
          assert.deepEqual({ field: err.field, reason: err.reason }, { field: v.want.field, reason: v.want.reason });
        }
        return true;
      });
      assert.equal(kms.calls + sqs.bodies.length, 0, 'no AWS call (GenerateDataKey, GenerateMac, SendMessage) before a refusal');
      assert.throws(() => p.validate(n));
    });
  }
});
