// The producer against an AWS emulator (KMS and SQS): what it sends is an
// intent whose sealed content KMS opens under the documented encryption
// context, and whose intent_mac KMS VerifyMac accepts over the binding
// recomputed from the received body, and refuses once a field changed. Needs AWS_ENDPOINT_URL (or ministack on 127.0.0.1:$MINISTACK_PORT,
// default 4566); skipped without one unless LEDGER_REQUIRE_EMULATOR=1 or CI.
import assert from 'node:assert/strict';
import { createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';

import { CreateKeyCommand, DecryptCommand, KMSClient, ScheduleKeyDeletionCommand, VerifyMacCommand } from '@aws-sdk/client-kms';
import { CreateQueueCommand, DeleteQueueCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import {
  canonicalPlaintext,
  contentHash,
  dedupeKey,
  encryptionContext,
  intentBinding,
  Producer,
  PublishError,
  type Envelope,
  type Notification,
} from '@resetledger/producer';

const required = process.env['LEDGER_REQUIRE_EMULATOR'] === '1' || process.env['CI'] !== undefined;
const endpoint = process.env['AWS_ENDPOINT_URL'] ?? `http://127.0.0.1:${process.env['MINISTACK_PORT'] ?? '4566'}`;

async function reachable(): Promise<boolean> {
  try {
    const res = await fetch(new URL('/_ministack/health', endpoint), { signal: AbortSignal.timeout(2000) });
    return res.status < 500 || process.env['AWS_ENDPOINT_URL'] !== undefined;
  } catch {
    return false;
  }
}

const up = await reachable();
if (!up && required) {
  throw new Error(`no AWS emulator at ${endpoint} (LEDGER_REQUIRE_EMULATOR=1 or CI): start one with localstack/ministack.sh start`);
}

// The clients the producer makes read the same environment an account
// service's would.
process.env['AWS_ENDPOINT_URL'] = endpoint;
process.env['AWS_REGION'] ??= 'us-east-1';
process.env['AWS_ACCESS_KEY_ID'] ??= 'test';
process.env['AWS_SECRET_ACCESS_KEY'] ??= 'test';

describe('producer on the emulator', { skip: up ? false : `no AWS emulator at ${endpoint}` }, () => {
  const kms = new KMSClient({});
  const sqs = new SQSClient({});
  const run = `node-producer-${randomBytes(4).toString('hex')}`;
  let keyArn = '';
  let intentKeyArn = '';
  let queueUrl = '';

  before(async () => {
    const key = await kms.send(new CreateKeyCommand({ Description: `${run} content key` }));
    keyArn = key.KeyMetadata?.Arn ?? '';
    const intentKey = await kms.send(new CreateKeyCommand({
      Description: `${run} intent key`, KeySpec: 'HMAC_256', KeyUsage: 'GENERATE_VERIFY_MAC',
    }));
    intentKeyArn = intentKey.KeyMetadata?.Arn ?? '';
    const q = await sqs.send(new CreateQueueCommand({ QueueName: run }));
    queueUrl = q.QueueUrl ?? '';
    assert.ok(keyArn && intentKeyArn && queueUrl);
  });

  after(async () => {
    await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
    await kms.send(new ScheduleKeyDeletionCommand({ KeyId: keyArn, PendingWindowInDays: 7 })).catch(() => undefined);
    await kms.send(new ScheduleKeyDeletionCommand({ KeyId: intentKeyArn, PendingWindowInDays: 7 })).catch(() => undefined);
    kms.destroy();
    sqs.destroy();
  });

  function notification(challengeId: string, channel: 'email' | 'sms', workflow: Notification['workflow']): Notification {
    const token = randomBytes(16).toString('hex');
    return {
      challengeId, channel, workflow,
      destinationRef: `acct-7:${channel}`,
      expiresAt: new Date(Date.now() + 10 * 60_000),
      templateId: `reset-${channel}`, templateVersion: '1', policyVersion: 'policy-1',
      message: channel === 'email'
        ? { to: 'player7@example.com', subject: 'Reset your password', body: `Reset: https://game.example.com/r?token=${token}` }
        : { to: '+15555550107', body: `Reset: https://game.example.com/r/${token}` },
    };
  }

  /**
   * The binding of a received intent body, recomputed from its members as
   * the claim function does (docs/intent-v2.md), not with the package.
   */
  function bindingOf(w: Record<string, unknown>): Buffer {
    const wf = w['workflow'] as { kind: string; order?: string[] };
    const challenge = w['challenge_id'] as string;
    const channel = w['channel'] as 'email' | 'sms';
    const values: [string, string][] = [
      ['schema_version', String(w['schema_version'])], ['purpose', w['purpose'] as string],
      ['challenge_id', challenge], ['channel', channel], ['dedupe_key', dedupeKey(challenge, channel)],
      ['workflow.kind', wf.kind], ['workflow.order', (wf.order ?? []).join(',')],
      ['destination_ref', w['destination_ref'] as string], ['subject_ref', (w['subject_ref'] as string | undefined) ?? ''],
      ['issued_at', w['issued_at'] as string], ['expires_at', w['expires_at'] as string],
      ['template_id', w['template_id'] as string], ['template_version', w['template_version'] as string],
      ['policy_version', w['policy_version'] as string], ['content_hash', w['content_hash'] as string],
      ['envelope', envelopeDigestOf(w['sealed_content'] as Record<string, unknown>)],
    ];
    return Buffer.from('resetledger-intent-binding/v3\n' + values.map(([k, v]) => `${k}:${Buffer.byteLength(v)}:${v}\n`).join(''));
  }

  /** The envelope's digest (docs/intent-v2.md §1.6), recomputed from the body's members, not with the package. */
  function envelopeDigestOf(e: Record<string, unknown>): string {
    const lines = ['v', 'alg', 'kms_key_id', 'edk', 'nonce', 'ct'].map((k) => {
      const v = String(e[k]);
      return `${k}:${Buffer.byteLength(v)}:${v}\n`;
    });
    return createHash('sha256').update(`resetledger-intent-envelope/v1\n${lines.join('')}`).digest('hex');
  }

  /** Whether KMS accepts mac (intent_mac, base64url) over binding under the intent key. */
  async function verifies(binding: Buffer, mac: string): Promise<boolean> {
    try {
      const out = await kms.send(new VerifyMacCommand({
        KeyId: intentKeyArn, MacAlgorithm: 'HMAC_SHA_256', Message: binding, Mac: Buffer.from(mac, 'base64url'),
      }));
      return out.MacValid === true;
    } catch (err) {
      if ((err as Error).name === 'KMSInvalidMacException') {
        return false;
      }
      throw err;
    }
  }

  async function receiveAll(want: number, waitMs = 15_000): Promise<string[]> {
    const bodies: string[] = [];
    const deadline = Date.now() + waitMs;
    while (bodies.length < want && Date.now() < deadline) {
      const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
      for (const m of out.Messages ?? []) bodies.push(m.Body ?? '');
    }
    return bodies;
  }

  test('publishes intents whose content KMS and AES-GCM open under the dedupe key', async () => {
    const producer = new Producer({ queueUrl, keyId: keyArn, intentKeyArn });
    const notifications = [
      notification(`${run}-1`, 'email', { kind: 'single' }),
      notification(`${run}-2`, 'email', { kind: 'fallback', order: ['email', 'sms'] }),
      notification(`${run}-2`, 'sms', { kind: 'fallback', order: ['email', 'sms'] }),
    ];
    const results = [];
    for (const n of notifications) {
      results.push(await producer.publish(n));
    }
    const bodies = await receiveAll(notifications.length);
    assert.equal(bodies.length, notifications.length);

    for (const [i, n] of notifications.entries()) {
      const key = dedupeKey(n.challengeId, n.channel);
      assert.equal(results[i]?.dedupeKey, key);
      assert.ok(results[i]?.messageId);
      const body = bodies.find((b) => (JSON.parse(b) as { challenge_id: string; channel: string }).challenge_id === n.challengeId &&
        (JSON.parse(b) as { channel: string }).channel === n.channel);
      assert.ok(body, `no message for ${n.challengeId}/${n.channel}`);
      for (const secret of [n.message.to, n.message.body]) {
        assert.ok(!body.includes(secret), 'the body holds the address or the link in clear');
      }
      const intent = JSON.parse(body) as { content_hash: string; sealed_content: Envelope; workflow: unknown; intent_mac: string };
      assert.equal(intent.content_hash, contentHash(n.templateId, n.templateVersion, n.message));
      assert.deepEqual(intent.workflow, n.workflow);

      // The seal: KMS accepts it over the binding recomputed from the body
      // (the package's own binding is the same bytes), and refuses it once
      // any field the claim decides on changed.
      const wire = JSON.parse(body) as Record<string, unknown>;
      const binding = bindingOf(wire);
      assert.deepEqual(binding, intentBinding({ ...n, issuedAt: results[i]?.issuedAt ?? new Date(0) }, intent.content_hash, intent.sealed_content));
      assert.ok(await verifies(binding, intent.intent_mac), 'intent_mac does not verify under the intent key');
      const tampered: Record<string, unknown>[] = [
        { expires_at: '2099-01-01T00:00:00Z' }, { issued_at: '2099-01-01T00:00:00Z' }, { subject_ref: 'acct-8' },
        { destination_ref: 'acct-8:email' }, { workflow: { kind: 'dual' } }, { template_version: '2' },
        { sealed_content: { ...intent.sealed_content, nonce: 'AAAAAAAAAAAAAAAA' } },
      ];
      for (const edit of tampered) {
        assert.equal(await verifies(bindingOf({ ...wire, ...edit }), intent.intent_mac), false, `a changed ${Object.keys(edit)[0]} still verifies`);
      }
      const env = intent.sealed_content;
      assert.equal(env.kms_key_id, keyArn, 'kms_key_id is the KeyId GenerateDataKey returned');

      const dk = await kms.send(new DecryptCommand({
        CiphertextBlob: Buffer.from(env.edk, 'base64'), KeyId: keyArn, EncryptionContext: encryptionContext(key),
      }));
      const ct = Buffer.from(env.ct, 'base64');
      const d = createDecipheriv('aes-256-gcm', dk.Plaintext ?? new Uint8Array(), Buffer.from(env.nonce, 'base64'));
      d.setAAD(Buffer.from(key, 'ascii'));
      d.setAuthTag(ct.subarray(ct.length - 16));
      // Envelope version 2: the GCM plaintext is the raw DEFLATE stream of the canonical plaintext.
      assert.equal(env.v, 2);
      const pt = inflateRawSync(Buffer.concat([d.update(ct.subarray(0, ct.length - 16)), d.final()]));
      assert.deepEqual(pt, canonicalPlaintext(n.message));
    }
  });

  test('a KMS failure sends nothing', async () => {
    const producer = new Producer({ queueUrl, keyId: 'arn:aws:kms:us-east-1:000000000000:key/00000000-0000-0000-0000-000000000000', intentKeyArn });
    await assert.rejects(producer.publish(notification(`${run}-3`, 'email', { kind: 'single' })), (err: unknown) => {
      assert.ok(err instanceof PublishError && err.stage === 'seal', String(err));
      return true;
    });
    assert.equal((await receiveAll(1, 3_000)).length, 0);
  });

  test('a GenerateMac failure (no such intent key) sends nothing', async () => {
    const producer = new Producer({
      queueUrl, keyId: keyArn, intentKeyArn: 'arn:aws:kms:us-east-1:000000000000:key/00000000-0000-0000-0000-000000000000',
    });
    await assert.rejects(producer.publish(notification(`${run}-5`, 'email', { kind: 'single' })), (err: unknown) => {
      assert.ok(err instanceof PublishError && err.stage === 'sign' && err.attempts === 0, String(err));
      return true;
    });
    assert.equal((await receiveAll(1, 3_000)).length, 0);
  });

  test('a missing queue is a send failure, not retried', async () => {
    const producer = new Producer({ queueUrl: `${queueUrl}-missing`, keyId: keyArn, intentKeyArn });
    await assert.rejects(producer.publish(notification(`${run}-4`, 'sms', { kind: 'single' })), (err: unknown) => {
      assert.ok(err instanceof PublishError && err.stage === 'send' && err.attempts === 1, String(err));
      return true;
    });
  });
});
