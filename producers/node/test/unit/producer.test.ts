// The producer's behaviour beyond the vectors: Node-specific input checks,
// issued_at and the intent's seal, retries (of the send only), errors, and
// what never leaves the process.
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe, test } from 'node:test';

import {
  envelopeDigest,
  ExpiredError,
  intentBinding,
  IntentError,
  isRetryable,
  Producer,
  PublishError,
  type Envelope,
  type Notification,
  type ProducerOptions,
} from '@resetledger/producer';

import { FakeKMS, FakeSQS, serviceError, validNotification } from './fixtures.js';

const CANARY = 'CANARY-token-7f3a9c';
const ADDRESS = 'player1001@example.com';
const NOW = new Date('2026-11-30T10:40:00Z');

const valid = (): Notification => validNotification(`https://game.example.com/reset?token=${CANARY}`);

const dataKey = { plaintext: new Uint8Array(32).fill(7), blob: new Uint8Array([1, 2, 3]), keyId: 'arn:aws:kms:us-east-1:111122223333:key/k' };

function producer(kms: FakeKMS, sqs: FakeSQS, extra: Partial<ProducerOptions> = {}): Producer {
  return new Producer({
    queueUrl: 'https://sqs.test/intents', keyId: 'alias/reset-content', intentKeyArn: 'alias/reset-intent', kms: kms.client(), sqs: sqs.client(),
    clock: () => NOW, retryBaseDelayMs: 1, retryMaxDelayMs: 2, ...extra,
  });
}

/** Fails unless err, however it is printed or serialized, holds no secret. */
function assertNoSecret(err: unknown): void {
  const views = [String(err), (err as Error).stack ?? '', inspect(err, { depth: Infinity, showHidden: true }), JSON.stringify(err)];
  for (const view of views) {
    for (const secret of [CANARY, ADDRESS, 'Reset your password', 'game.example.com']) {
      assert.ok(!view.includes(secret), `error leaks ${secret}: ${view.slice(0, 300)}`);
    }
  }
}

describe('input the Go producer has no equivalent for', () => {
  const cases: [string, (n: Record<string, unknown> & { message: Record<string, unknown> }) => void, string, string][] = [
    ['lone surrogate in the body', (n) => { n.message.body = 'reset \ud800 link'; }, 'message.body', 'not valid UTF-8'],
    ['lone surrogate in the address', (n) => { n.message.to = '\udfff@example.com'; }, 'message.to', 'not valid UTF-8'],
    ['invalid Date', (n) => { n.expiresAt = new Date('not a date'); }, 'expires_at', 'want a valid Date'],
    ['expiry as a string', (n) => { n.expiresAt = '2026-11-30T10:50:00Z'; }, 'expires_at', 'want a valid Date'],
    ['expiry after year 9999', (n) => { n.expiresAt = new Date(Date.UTC(10000, 0, 1)); }, 'expires_at', 'year outside 0001..9999'],
    ['invalid issued Date', (n) => { n.issuedAt = new Date('not a date'); }, 'issued_at', 'want a valid Date'],
    ['issued_at as a string', (n) => { n.issuedAt = '2026-11-30T10:39:00Z'; }, 'issued_at', 'want a valid Date'],
    ['issued in year 0', (n) => { n.issuedAt = new Date('0000-06-01T00:00:00Z'); }, 'issued_at', 'year outside 0001..9999'],
    ['challenge id as a number', (n) => { n.challengeId = 1234; }, 'challenge_id', 'want a string'],
    ['no workflow', (n) => { delete n.workflow; }, 'workflow.kind', 'unknown workflow (want single, dual or fallback)'],
    ['order not an array', (n) => { n.workflow = { kind: 'fallback', order: 'email,sms' }; }, 'workflow.order', 'want an array of channels'],
    ['subject as a number', (n) => { n.message.subject = 7; }, 'message.subject', 'want a string'],
    ['no message', (n) => { delete (n as Record<string, unknown>).message; }, 'message', 'missing'],
    ['subject reference as a number', (n) => { n.subjectRef = 1001; }, 'subject_ref', 'want a string'],
  ];
  for (const [name, edit, field, reason] of cases) {
    test(name, async () => {
      const n = valid() as unknown as Record<string, unknown> & { message: Record<string, unknown> };
      if (n.message) n.message = { ...n.message };
      edit(n);
      const kms = new FakeKMS(dataKey);
      const sqs = new FakeSQS();
      await assert.rejects(producer(kms, sqs).publish(n as unknown as Notification), (err: unknown) => {
        assert.ok(err instanceof IntentError, String(err));
        assert.deepEqual([err.field, err.reason], [field, reason]);
        assertNoSecret(err);
        return true;
      });
      assert.equal(kms.calls + sqs.bodies.length, 0);
    });
  }

  test('subjectRef: none, empty or null publishes no subject_ref; a value follows destination_ref', async () => {
    for (const subjectRef of [undefined, '', null]) {
      const sqs = new FakeSQS();
      const n = { ...valid(), subjectRef } as unknown as Notification;
      await producer(new FakeKMS(dataKey), sqs).publish(n);
      assert.ok(!(sqs.bodies[0] ?? '').includes('subject_ref'), `subjectRef ${String(subjectRef)}: ${sqs.bodies[0]}`);
    }
    const sqs = new FakeSQS();
    await producer(new FakeKMS(dataKey), sqs).publish({ ...valid(), subjectRef: 'acct-1001' });
    const body = JSON.parse(sqs.bodies[0] ?? '{}') as Record<string, unknown>;
    assert.equal(body.subject_ref, 'acct-1001');
    const keys = Object.keys(body);
    assert.equal(keys.indexOf('subject_ref'), keys.indexOf('destination_ref') + 1);
  });

  test('issuedAt: none or null is the clock\'s time, written after subject_ref and sealed', async () => {
    for (const issuedAt of [undefined, null]) {
      const kms = new FakeKMS(dataKey);
      const sqs = new FakeSQS();
      const n = { ...valid(), subjectRef: 'acct-1001', issuedAt } as unknown as Notification;
      const res = await producer(kms, sqs).publish(n);
      assert.deepEqual(res.issuedAt, NOW);
      const body = JSON.parse(sqs.bodies[0] ?? '{}') as Record<string, unknown>;
      assert.equal(body.issued_at, '2026-11-30T10:40:00Z');
      const keys = Object.keys(body);
      assert.deepEqual(keys.slice(keys.indexOf('subject_ref'), keys.indexOf('subject_ref') + 3), ['subject_ref', 'issued_at', 'expires_at']);
      assert.equal(keys.at(-1), 'intent_mac');
      assert.deepEqual(kms.macInputs.map((i) => Buffer.from(i.Message ?? []).toString('utf8')),
        [intentBinding({ ...valid(), subjectRef: 'acct-1001', issuedAt: NOW }, res.contentHash, body.sealed_content as Envelope).toString('utf8')]);
    }
  });

  test('issuedAt given is the one written and sealed, not the clock\'s', async () => {
    const kms = new FakeKMS(dataKey);
    const sqs = new FakeSQS();
    const issuedAt = new Date('2026-11-30T10:38:12.5Z');
    const res = await producer(kms, sqs).publish({ ...valid(), issuedAt });
    assert.deepEqual(res.issuedAt, issuedAt);
    assert.equal((JSON.parse(sqs.bodies[0] ?? '{}') as Record<string, unknown>).issued_at, '2026-11-30T10:38:12.5Z');
    assert.match(Buffer.from(kms.macInputs[0]?.Message ?? []).toString('utf8'), /\nissued_at:22:2026-11-30T10:38:12\.5Z\n/);
  });

  test('the binding changes with every field the claim decides on, and with the envelope', () => {
    const n = { ...valid(), issuedAt: new Date('2026-11-30T10:39:00Z') };
    const hash = '0'.repeat(64);
    const env: Envelope = {
      v: 2, alg: 'AES-256-GCM', kms_key_id: 'arn:aws:kms:us-east-1:111122223333:key/k', edk: 'AAEC', nonce: 'AAECAwQFBgcICQoL', ct: 'AAECAwQFBgcICQoLDA0ODxAREhMU',
    };
    const base = intentBinding(n, hash, env).toString('utf8');
    assert.ok(base.startsWith('resetledger-intent-binding/v3\nschema_version:1:3\n'));
    assert.ok(base.endsWith(`\nenvelope:64:${envelopeDigest(env)}\n`));
    const edits: Partial<Notification>[] = [
      { challengeId: 'chal-7f3a9c02' }, { channel: 'sms', destinationRef: 'acct-1001:email' },
      { workflow: { kind: 'dual' } }, { workflow: { kind: 'fallback', order: ['email', 'sms'] } },
      { destinationRef: 'acct-1002:email' }, { subjectRef: 'acct-1001' },
      { issuedAt: new Date('2026-11-30T10:39:00.001Z') }, { expiresAt: new Date('2099-01-01T00:00:00Z') },
      { templateId: 'reset-email-2' }, { templateVersion: '4' }, { policyVersion: 'policy-2' },
    ];
    for (const edit of edits) {
      assert.notEqual(intentBinding({ ...n, ...edit }, hash, env).toString('utf8'), base, JSON.stringify(edit));
    }
    assert.notEqual(intentBinding(n, '1'.repeat(64), env).toString('utf8'), base, 'content hash');
    // One bit of ct (0x14 → 0x15 in its last byte), or any other envelope member.
    const envEdits: Partial<Envelope>[] = [
      { ct: 'AAECAwQFBgcICQoLDA0ODxAREhMV' }, { nonce: 'AAECAwQFBgcICQoM' }, { edk: 'AAED' }, { kms_key_id: 'arn:aws:kms:us-east-1:111122223333:key/l' },
    ];
    for (const edit of envEdits) {
      assert.notEqual(intentBinding(n, hash, { ...env, ...edit }).toString('utf8'), base, JSON.stringify(edit));
    }
    assert.throws(() => intentBinding(valid(), hash, env), (err: unknown) => err instanceof IntentError && err.field === 'issued_at');
  });

  test('a fallback pair validates on both channels', () => {
    const p = producer(new FakeKMS(dataKey), new FakeSQS());
    for (const channel of ['email', 'sms'] as const) {
      const n = { ...valid(), channel, workflow: { kind: 'fallback' as const, order: ['email', 'sms'] as const } };
      assert.equal(p.validate(n).dedupeKey.length, 64);
    }
  });
});

describe('retries: the send only, with the same sealed intent', () => {
  test('transient send failures are retried', async () => {
    const kms = new FakeKMS(dataKey);
    const sqs = new FakeSQS([serviceError('RequestThrottled', 403), serviceError('InternalError', 500)]);
    const res = await producer(kms, sqs).publish(valid());
    assert.equal(res.attempts, 3);
    assert.equal(res.messageId, 'msg-3');
    assert.deepEqual([kms.inputs.length, kms.macInputs.length], [1, 1], 'sealed and signed once');
    assert.equal(new Set(sqs.bodies).size, 1, 'every attempt sends the same body');
  });

  test('a network error is retried', async () => {
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const sqs = new FakeSQS([reset]);
    assert.equal((await producer(new FakeKMS(dataKey), sqs).publish(valid())).attempts, 2);
  });

  test('a definite refusal is not retried', async () => {
    const sqs = new FakeSQS([serviceError('AWS.SimpleQueueService.NonExistentQueue', 400)]);
    await assert.rejects(producer(new FakeKMS(dataKey), sqs).publish(valid()), (err: unknown) => {
      assert.ok(err instanceof PublishError);
      assert.equal(err.stage, 'send');
      assert.equal(err.attempts, 1);
      assert.equal(err.code, 'ERR_PUBLISH');
      assertNoSecret(err);
      return true;
    });
    assert.equal(sqs.bodies.length, 1);
  });

  test('attempts are bounded', async () => {
    const sqs = new FakeSQS(Array.from({ length: 5 }, () => serviceError('ServiceUnavailable', 503)));
    await assert.rejects(producer(new FakeKMS(dataKey), sqs, { maxSendAttempts: 4 }).publish(valid()), (err: unknown) => {
      assert.ok(err instanceof PublishError && err.attempts === 4, String(err));
      assert.ok((err.cause as Error).name === 'ServiceUnavailable');
      assertNoSecret(err);
      return true;
    });
    assert.equal(sqs.bodies.length, 4);
  });

  test('no attempt after the challenge expired', async () => {
    const sqs = new FakeSQS([serviceError('InternalError', 500), serviceError('InternalError', 500)]);
    const n = { ...valid(), expiresAt: new Date(NOW.getTime() + 1) };
    await assert.rejects(producer(new FakeKMS(dataKey), sqs, { retryBaseDelayMs: 50, retryMaxDelayMs: 50 }).publish(n), (err: unknown) => {
      assert.ok(err instanceof PublishError, String(err));
      assert.match(err.message, /expires before the next/);
      return true;
    });
  });

  test('a KMS failure is not retried and sends nothing', async () => {
    const kms = new FakeKMS(dataKey, serviceError('ThrottlingException', 400));
    const sqs = new FakeSQS();
    await assert.rejects(producer(kms, sqs).publish(valid()), (err: unknown) => {
      assert.ok(err instanceof PublishError);
      assert.deepEqual([err.stage, err.attempts], ['seal', 0]);
      assertNoSecret(err);
      return true;
    });
    assert.deepEqual([kms.calls, sqs.bodies.length], [1, 0]);
  });

  test('a GenerateMac failure is not retried and sends nothing', async () => {
    const kms = new FakeKMS(dataKey, undefined, { mac: new Uint8Array(32), keyId: 'k', err: serviceError('AccessDeniedException', 400) });
    const sqs = new FakeSQS();
    await assert.rejects(producer(kms, sqs).publish(valid()), (err: unknown) => {
      assert.ok(err instanceof PublishError, String(err));
      assert.deepEqual([err.stage, err.attempts], ['sign', 0]);
      assert.match(err.message, /GenerateMac/);
      assertNoSecret(err);
      return true;
    });
    assert.deepEqual([kms.macInputs.length, sqs.bodies.length], [1, 0]);
  });

  test('a MAC of the wrong length is refused', async () => {
    const kms = new FakeKMS(dataKey, undefined, { mac: new Uint8Array(16), keyId: 'k' });
    const sqs = new FakeSQS();
    await assert.rejects(producer(kms, sqs).publish(valid()), (err: unknown) => err instanceof PublishError && err.stage === 'sign');
    assert.equal(sqs.bodies.length, 0);
  });

  test('a malformed data key is refused', async () => {
    const kms = new FakeKMS({ ...dataKey, plaintext: new Uint8Array(16) });
    await assert.rejects(producer(kms, new FakeSQS()).publish(valid()), (err: unknown) => {
      assert.ok(err instanceof PublishError && err.stage === 'seal', String(err));
      return true;
    });
  });

  test('abort stops the waits between attempts', async () => {
    const sqs = new FakeSQS([serviceError('InternalError', 500), serviceError('InternalError', 500)]);
    const ac = new AbortController();
    const p = producer(new FakeKMS(dataKey), sqs, { retryBaseDelayMs: 60_000, retryMaxDelayMs: 60_000, clock: () => NOW });
    const pending = p.publish({ ...valid(), expiresAt: new Date(NOW.getTime() + 3_600_000) }, { abortSignal: ac.signal });
    setTimeout(() => ac.abort(), 10);
    await assert.rejects(pending, (err: unknown) => err instanceof PublishError && /aborted/.test(err.message));
  });

  test('classification', () => {
    assert.equal(isRetryable(serviceError('KMSInvalidStateException', 400)), false);
    assert.equal(isRetryable(serviceError('Whatever', 502)), true);
    assert.equal(isRetryable(Object.assign(new Error('x'), { $retryable: { throttling: true } })), true);
    assert.equal(isRetryable(Object.assign(new Error('aborted'), { name: 'AbortError' })), false);
    assert.equal(isRetryable('nope'), false);
  });
});

describe('errors', () => {
  test('an expired challenge is its own error, before any call', async () => {
    const kms = new FakeKMS(dataKey);
    const n = { ...valid(), expiresAt: NOW };
    await assert.rejects(producer(kms, new FakeSQS()).publish(n), (err: unknown) => {
      assert.ok(err instanceof ExpiredError);
      assert.equal(err.message, 'resetledger: publish chal-7f3a9c01/email: challenge already expired');
      assertNoSecret(err);
      return true;
    });
    assert.equal(kms.calls, 0);
  });

  test('expiry is checked before issued_at, as the Go producer does', async () => {
    const kms = new FakeKMS(dataKey);
    const n = { ...valid(), expiresAt: NOW, issuedAt: new Date(NOW.getTime() + 3_600_000) };
    await assert.rejects(producer(kms, new FakeSQS()).publish(n), ExpiredError);
    // And a default issued_at (the clock) is never at or after a future expiry.
    const soon = { ...valid(), expiresAt: new Date(NOW.getTime() + 1) };
    assert.deepEqual(producer(kms, new FakeSQS()).validate(soon).issuedAt, NOW);
    assert.equal(kms.calls, 0);
  });

  test('no error names or quotes the message', async () => {
    const bad = [
      { ...valid(), destinationRef: ADDRESS },
      { ...valid(), subjectRef: ADDRESS },
      { ...valid(), challengeId: `chal\n${CANARY}` },
      { ...valid(), message: { ...valid().message, body: CANARY.repeat(5000) } },
    ];
    for (const n of bad) {
      await assert.rejects(producer(new FakeKMS(dataKey), new FakeSQS()).publish(n), (err: unknown) => {
        assertNoSecret(err);
        return true;
      });
    }
  });

  test('the constructor needs a queue, the content key and the intent key', () => {
    assert.throws(() => new Producer({ queueUrl: '', keyId: 'k', intentKeyArn: 'i' }), TypeError);
    assert.throws(() => new Producer({ queueUrl: 'q', keyId: '', intentKeyArn: 'i' }), TypeError);
    assert.throws(() => new Producer({ queueUrl: 'q', keyId: 'k', intentKeyArn: '' }), TypeError);
    assert.throws(() => new Producer({ queueUrl: 'q', keyId: 'k' } as ProducerOptions), /intentKeyArn/);
  });
});

describe('package', () => {
  test('exports only its entry point', async () => {
    const pkg = (await import('@resetledger/producer/package.json', { with: { type: 'json' } })) as { default: { name: string } };
    assert.equal(pkg.default.name, '@resetledger/producer');
    await assert.rejects(import('@resetledger/producer/dist/envelope.js' as string), { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' });
  });
});
