// Envelope version 3, a preset DEFLATE dictionary: the package against
// testdata/vectors/dictionary.json (which the Go tests generate and check),
// and the dictionary option's checks.
import assert from 'node:assert/strict';
import { createDecipheriv, createHash } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { describe, test } from 'node:test';

import {
  aad,
  canonicalPlaintext,
  contentHash,
  dedupeKey,
  dictionaryId,
  encodeIntent,
  encryptionContext,
  envelopeDigest,
  envelopeDigestPreimage,
  intentBinding,
  IntentError,
  MAX_BODY_SIZE,
  MAX_DICTIONARY,
  Producer,
  seal,
  validate,
  type Envelope,
  type Notification,
} from '@resetledger/producer';

import { compress, sealWith } from '../../dist/envelope.js';
import { FakeKMS, FakeSQS, loadVectors, notification, validNotification, type IntentVector } from './fixtures.js';


const doc = loadVectors<{ description: string; dictionary: string; dictionary_id: string; vectors: IntentVector[] }>('dictionary.json');
const dictionary = Buffer.from(doc.dictionary, 'utf8');

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/**
 * Opens envelope `e` (version 3) with the data key and the dictionary:
 * AES-256-GCM with the dedupe key as AAD, then raw inflate against the
 * dictionary, as the consumer does.
 */
function openWith(dataKey: Uint8Array, key: string, e: Envelope, dict?: Uint8Array): string {
  const ct = Buffer.from(e.ct, 'base64');
  const d = createDecipheriv('aes-256-gcm', dataKey, Buffer.from(e.nonce, 'base64'));
  d.setAAD(Buffer.from(key, 'ascii'));
  d.setAuthTag(ct.subarray(ct.length - 16));
  const z = Buffer.concat([d.update(ct.subarray(0, ct.length - 16)), d.final()]);
  return inflateRawSync(z, dict === undefined ? {} : { dictionary: dict }).toString('utf8');
}

describe('dictionary.json', () => {
  test('has vectors, and the dictionary its id names', () => {
    assert.ok(doc.vectors.length >= 4);
    assert.equal(sha256(dictionary), doc.dictionary_id);
    assert.equal(dictionaryId(dictionary), doc.dictionary_id);
    assert.ok(dictionary.length >= 1 && dictionary.length <= MAX_DICTIONARY);
  });

  for (const v of doc.vectors) {
    describe(v.name, () => {
      const n = notification(v.notification);
      const dataKey = {
        plaintext: Buffer.from(v.generate_data_key.Plaintext_hex, 'hex'),
        blob: Buffer.from(v.generate_data_key.CiphertextBlob_base64, 'base64'),
        keyId: v.generate_data_key.KeyId,
      };
      const mac = { mac: Buffer.from(v.generate_mac.Mac_base64, 'base64'), keyId: v.generate_mac.KeyId };

      test('the vector is version 3 naming the dictionary', () => {
        assert.equal(v.sealed_content.v, 3);
        assert.equal(v.sealed_content.dict, doc.dictionary_id);
        assert.deepEqual(Object.keys(v.sealed_content), ['v', 'alg', 'kms_key_id', 'dict', 'edk', 'nonce', 'ct']);
      });

      test('dedupe key, content hash, canonical plaintext, AAD, encryption context', () => {
        assert.equal(dedupeKey(n.challengeId, n.channel), v.dedupe_key);
        assert.equal(contentHash(n.templateId, n.templateVersion, n.message), v.content_hash);
        const pt = canonicalPlaintext(n.message);
        assert.equal(pt.toString('hex'), v.plaintext_hex);
        assert.equal(pt.toString('utf8'), v.plaintext);
        assert.equal(aad(v.dedupe_key).toString('hex'), v.aad_hex);
        assert.deepEqual(encryptionContext(v.dedupe_key), v.encryption_context);
      });

      test('envelope digest: the preimage carries dict', () => {
        const pre = envelopeDigestPreimage(v.sealed_content);
        assert.equal(pre.toString('utf8'), v.envelope_preimage);
        assert.ok(pre.toString('utf8').includes(`\nkms_key_id:${v.sealed_content.kms_key_id.length}:${v.sealed_content.kms_key_id}\ndict:64:${doc.dictionary_id}\nedk:`));
        assert.equal(sha256(pre), v.envelope);
        assert.equal(envelopeDigest(v.sealed_content), v.envelope);
      });

      test('binding', () => {
        assert.equal(intentBinding(n, v.content_hash, v.sealed_content).toString('utf8'), v.binding);
      });

      test('intent body', () => {
        assert.equal(encodeIntent(n, v.content_hash, v.sealed_content, v.intent_mac), v.body);
      });

      test('envelope with the fixed data key and nonce, against the dictionary', () => {
        const env = sealWith(
          v.dedupe_key,
          canonicalPlaintext(n.message),
          { plaintext: dataKey.plaintext, ciphertextBlob: dataKey.blob, keyId: dataKey.keyId },
          Buffer.from(v.nonce_hex, 'hex'),
          dictionary,
        );
        // Every member but ct is the vector's byte for byte, in the same order;
        // ct differs where zlib's DEFLATE stream differs from Go's.
        assert.deepEqual(Object.keys(env), Object.keys(v.sealed_content));
        assert.deepEqual({ ...env, ct: '' }, { ...v.sealed_content, ct: '' });
        assert.equal(env.v, 3);
        assert.equal(env.dict, doc.dictionary_id);
        // Ours opens, with node:crypto and node:zlib alone, to the plaintext.
        assert.equal(openWith(dataKey.plaintext, v.dedupe_key, env, dictionary), v.plaintext);
        // And so does the Go producer's (the vector's), whose stream is deflate_hex.
        assert.equal(openWith(dataKey.plaintext, v.dedupe_key, v.sealed_content, dictionary), v.plaintext);
        assert.equal(inflateRawSync(Buffer.from(v.deflate_hex, 'hex'), { dictionary }).toString('utf8'), v.plaintext);
        // Where zlib writes Go's very stream, the ciphertext is Go's too.
        if (compress(canonicalPlaintext(n.message), dictionary).toString('hex') === v.deflate_hex) {
          assert.equal(env.ct, v.sealed_content.ct);
        }
      });

      test('publish with the dictionary: version 3, the binding of the envelope sent, the body up to the random nonce', async () => {
        const kms = new FakeKMS(dataKey, undefined, mac);
        const sqs = new FakeSQS();
        const p = new Producer({
          queueUrl: 'https://sqs.test/intents', keyId: 'alias/reset-content', intentKeyArn: 'alias/reset-intent',
          kms: kms.client(), sqs: sqs.client(), clock: () => new Date(n.expiresAt.getTime() - 60_000), dictionary,
        });
        const res = await p.publish(n);
        assert.deepEqual(res, { dedupeKey: v.dedupe_key, contentHash: v.content_hash, issuedAt: n.issuedAt, messageId: 'msg-1', attempts: 1 });
        assert.deepEqual(kms.inputs, [{ KeyId: 'alias/reset-content', KeySpec: 'AES_256', EncryptionContext: v.encryption_context }]);
        const body = sqs.bodies[0] ?? '';
        const sent = (JSON.parse(body) as { sealed_content: Envelope }).sealed_content;
        assert.equal(sent.v, 3);
        assert.equal(sent.dict, doc.dictionary_id);
        const binding = intentBinding(n, v.content_hash, sent);
        assert.deepEqual(kms.macInputs, [{ KeyId: 'alias/reset-intent', MacAlgorithm: v.generate_mac.MacAlgorithm, Message: binding }]);
        assert.equal(binding.toString('utf8'), v.binding.replace(`envelope:64:${v.envelope}\n`, `envelope:64:${envelopeDigest(sent)}\n`));
        assert.notEqual(sent.nonce, v.sealed_content.nonce, 'the nonce is random');
        const reSealed = sealWith(v.dedupe_key, canonicalPlaintext(n.message),
          { plaintext: dataKey.plaintext, ciphertextBlob: dataKey.blob, keyId: dataKey.keyId }, Buffer.from(sent.nonce, 'base64'), dictionary);
        assert.deepEqual(sent, reSealed);
        assert.equal(openWith(dataKey.plaintext, v.dedupe_key, sent, dictionary), v.plaintext);
        // Byte for byte the vector's body, but for the sealed content's random nonce (and so its ciphertext).
        assert.equal(body.replace(JSON.stringify(reSealed), JSON.stringify(v.sealed_content)), v.body);
      });
    });
  }
});

describe('the dictionary option', () => {
  const v = doc.vectors[0]!;
  const n = notification(v.notification);
  const key = { plaintext: new Uint8Array(32).fill(7), blob: new Uint8Array([1, 2, 3]), keyId: 'arn:aws:kms:us-east-1:111122223333:key/k' };
  const base = { queueUrl: 'https://sqs.test/intents', keyId: 'alias/reset-content', intentKeyArn: 'alias/reset-intent' };

  test('an empty or oversized dictionary, or one that is not bytes, is refused at construction', () => {
    for (const bad of [new Uint8Array(0), Buffer.alloc(0), Buffer.alloc(MAX_DICTIONARY + 1, 'a')]) {
      assert.throws(() => new Producer({ ...base, dictionary: bad }), (err: unknown) =>
        err instanceof RangeError && /dictionary must be 1 to 32768 bytes/.test(err.message));
    }
    for (const bad of ['template text', [1, 2, 3], null]) {
      assert.throws(() => new Producer({ ...base, dictionary: bad as unknown as Uint8Array }), TypeError);
    }
    assert.doesNotThrow(() => new Producer({ ...base, dictionary: Buffer.alloc(MAX_DICTIONARY, 'a') }));
    assert.doesNotThrow(() => new Producer({ ...base, dictionary: new Uint8Array([0x7b]) }));
  });

  test('seal, sealWith and validate refuse a bad dictionary too, before any KMS call', async () => {
    const kms = new FakeKMS(key);
    for (const bad of [new Uint8Array(0), new Uint8Array(MAX_DICTIONARY + 1)]) {
      await assert.rejects(seal(kms.client(), 'k', v.dedupe_key, n.message, { dictionary: bad }), RangeError);
      assert.throws(() => sealWith(v.dedupe_key, canonicalPlaintext(n.message),
        { plaintext: key.plaintext, ciphertextBlob: key.blob, keyId: key.keyId }, new Uint8Array(12), bad), RangeError);
      assert.throws(() => validate(n, new Date(n.expiresAt.getTime() - 60_000), { dictionary: bad }), RangeError);
    }
    assert.equal(kms.calls, 0);
  });

  test('without a dictionary the envelope is version 2, with no dict', async () => {
    const kms = new FakeKMS(key);
    const sqs = new FakeSQS();
    const p = new Producer({ ...base, kms: kms.client(), sqs: sqs.client(), clock: () => new Date(n.expiresAt.getTime() - 60_000) });
    await p.publish(n);
    const sent = (JSON.parse(sqs.bodies[0] ?? '') as { sealed_content: Envelope }).sealed_content;
    assert.equal(sent.v, 2);
    assert.deepEqual(Object.keys(sent), ['v', 'alg', 'kms_key_id', 'edk', 'nonce', 'ct']);
    assert.ok(!envelopeDigestPreimage(sent).toString('utf8').includes('\ndict:'));
    assert.equal(openWith(key.plaintext, v.dedupe_key, sent), v.plaintext);
    const sealed = await seal(kms.client(), 'k', v.dedupe_key, n.message);
    assert.equal(sealed.v, 2);
    assert.ok(!('dict' in sealed));
  });

  test('the dictionary is copied: changing the caller\'s buffer later changes nothing', async () => {
    const mine = Buffer.from(dictionary);
    const kms = new FakeKMS(key);
    const sqs = new FakeSQS();
    const p = new Producer({ ...base, kms: kms.client(), sqs: sqs.client(), clock: () => new Date(n.expiresAt.getTime() - 60_000), dictionary: mine });
    mine.fill(0);
    await p.publish(n);
    const sent = (JSON.parse(sqs.bodies[0] ?? '') as { sealed_content: Envelope }).sealed_content;
    assert.equal(sent.dict, doc.dictionary_id);
    assert.equal(openWith(key.plaintext, v.dedupe_key, sent, dictionary), v.plaintext);
  });

  test('the size check compresses with the dictionary and counts dict', async () => {
    // A body that barely compresses (base64 of pseudo-random bytes), cut to
    // the longest validate admits with the dictionary: published with the
    // smallest data key and key id, its intent fits the queue exactly as
    // the check computed, dict included. A check that left dict out would
    // admit longer bodies, which then fail after KMS answered.
    const issued = { ...valid(), issuedAt: new Date('2026-11-30T10:41:00Z') };
    const now = new Date('2026-11-30T10:42:00Z');
    let noise = Buffer.alloc(0);
    for (let i = 0; noise.length < 60_000; i++) {
      noise = Buffer.concat([noise, createHash('sha256').update(`noise-${i}`).digest()]);
    }
    const text = noise.toString('base64');
    const withBody = (len: number): Notification => ({ ...issued, message: { ...issued.message, body: text.slice(0, len) } });
    const fits = (len: number, opts = {}): boolean => {
      try {
        validate(withBody(len), now, opts);
        return true;
      } catch (err) {
        assert.ok(err instanceof IntentError && err.field === 'message', String(err));
        return false;
      }
    };
    const longest = (opts = {}): number => {
      let lo = 1000; // fits
      let hi = text.length; // does not
      assert.ok(fits(lo, opts) && !fits(hi, opts));
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (fits(mid, opts)) {
          lo = mid;
        } else {
          hi = mid;
        }
      }
      return lo;
    };
    const withDict = longest({ dictionary });
    const without = longest();
    assert.ok(withDict < without, `with the dictionary ${withDict}, without ${without}`);

    const smallestKey = { plaintext: new Uint8Array(32).fill(7), blob: new Uint8Array([1]), keyId: 'k' };
    const sqs = new FakeSQS();
    const p = new Producer({ ...base, kms: new FakeKMS(smallestKey).client(), sqs: sqs.client(), clock: () => now, dictionary });
    await p.publish(withBody(withDict));
    const body = sqs.bodies[0] ?? '';
    assert.ok(Buffer.byteLength(body) <= MAX_BODY_SIZE && Buffer.byteLength(body) > MAX_BODY_SIZE - 64, `body of ${Buffer.byteLength(body)} bytes`);
    assert.throws(() => p.validate(withBody(withDict + 1)), IntentError);
  });
});

const valid = (): Notification => validNotification('x');
