// Test helpers: the vector files and fake AWS clients.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';

import { GenerateDataKeyCommand, GenerateMacCommand, type GenerateMacCommandInput } from '@aws-sdk/client-kms';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import type { DataKeyClient, Envelope, MacClient, Notification, QueueClient } from '@resetledger/producer';

/** testdata/vectors of the repository (this package is producers/node). */
export const vectorsDir = new URL('../../../../testdata/vectors/', import.meta.url);

export function loadVectors<T>(name: string): T {
  return JSON.parse(readFileSync(new URL(name, vectorsDir), 'utf8')) as T;
}

/** Writes a vector file (only under VECTORS_UPDATE=1). */
export function writeVectors(name: string, content: string): void {
  const url = new URL(name, vectorsDir);
  mkdirSync(new URL('.', url), { recursive: true });
  writeFileSync(url, content);
}

/** A string in a vector file: plain, or {repeat, count}. */
export type Text = string | { repeat: string; count: number };

export const text = (t: Text): string => (typeof t === 'string' ? t : t.repeat.repeat(t.count));

export interface VectorNotification {
  challenge_id: string;
  channel: string;
  workflow: { kind: string; order?: string[] };
  destination_ref: string;
  subject_ref?: string;
  issued_at?: string;
  expires_at: string;
  template_id: string;
  template_version: string;
  policy_version: string;
  message: { to: Text; subject: Text; body: Text };
}

/** The notification of a vector, as the package takes it. */
export function notification(v: VectorNotification): Notification {
  const n = {
    challengeId: v.challenge_id,
    channel: v.channel,
    workflow: v.workflow.order === undefined ? { kind: v.workflow.kind } : { kind: v.workflow.kind, order: v.workflow.order },
    destinationRef: v.destination_ref,
    ...(v.subject_ref === undefined ? {} : { subjectRef: v.subject_ref }),
    ...(v.issued_at === undefined ? {} : { issuedAt: new Date(v.issued_at) }),
    expiresAt: v.expires_at === '' ? undefined : new Date(v.expires_at),
    templateId: v.template_id,
    templateVersion: v.template_version,
    policyVersion: v.policy_version,
    message: { to: text(v.message.to), subject: text(v.message.subject), body: text(v.message.body) },
  };
  return n as unknown as Notification;
}

/** What the fake KMS answers GenerateMac with (or fails with err). */
export interface FakeMac {
  mac: Uint8Array;
  keyId: string;
  err?: Error;
}

/**
 * A KMS stand-in that hands out the given data key (or fails with err) and
 * answers GenerateMac with the given MAC. `calls` counts both calls;
 * `inputs` holds the GenerateDataKey inputs, `macInputs` the GenerateMac
 * ones.
 */
export class FakeKMS {
  calls = 0;
  handed: Uint8Array[] = [];
  inputs: unknown[] = [];
  macInputs: GenerateMacCommandInput[] = [];
  constructor(
    private readonly key: { plaintext: Uint8Array; blob: Uint8Array; keyId: string },
    private readonly err?: Error,
    private readonly mac: FakeMac = { mac: new Uint8Array(32).fill(9), keyId: 'arn:aws:kms:us-east-1:111122223333:key/intent' },
  ) {}

  async send(cmd: unknown): Promise<unknown> {
    if (cmd instanceof GenerateMacCommand) {
      this.calls++;
      this.macInputs.push(cmd.input);
      if (this.mac.err) {
        throw this.mac.err;
      }
      return { KeyId: this.mac.keyId, MacAlgorithm: cmd.input.MacAlgorithm, Mac: Uint8Array.from(this.mac.mac) };
    }
    if (!(cmd instanceof GenerateDataKeyCommand)) {
      throw new Error('fake KMS: unexpected command');
    }
    this.calls++;
    this.inputs.push(cmd.input);
    if (this.err) {
      throw this.err;
    }
    const plaintext = Uint8Array.from(this.key.plaintext);
    this.handed.push(plaintext);
    return { KeyId: this.key.keyId, Plaintext: plaintext, CiphertextBlob: Uint8Array.from(this.key.blob) };
  }

  client(): DataKeyClient & MacClient {
    return this as unknown as DataKeyClient & MacClient;
  }
}

/** An SQS stand-in: each call takes the next scripted error, or succeeds. */
export class FakeSQS {
  bodies: string[] = [];
  queueUrls: string[] = [];
  constructor(private readonly errors: Error[] = []) {}

  async send(cmd: unknown): Promise<unknown> {
    if (!(cmd instanceof SendMessageCommand)) {
      throw new Error('fake SQS: unexpected command');
    }
    this.bodies.push(cmd.input.MessageBody ?? '');
    this.queueUrls.push(cmd.input.QueueUrl ?? '');
    const err = this.errors.shift();
    if (err) {
      throw err;
    }
    return { MessageId: `msg-${this.bodies.length}` };
  }

  client(): QueueClient {
    return this as unknown as QueueClient;
  }
}

/** An SDK-shaped service error. */
export function serviceError(name: string, status: number, message = `fake ${name}`): Error {
  const e = new Error(message) as Error & { $metadata: { httpStatusCode: number }; $fault: string };
  e.name = name;
  e.$metadata = { httpStatusCode: status };
  e.$fault = status >= 500 ? 'server' : 'client';
  return e;
}

/** A vector of intents.json or dictionary.json: a notification and what a producer computes from it. */
export interface IntentVector {
  name: string;
  notification: VectorNotification;
  dedupe_key_preimage: string;
  dedupe_key: string;
  content_hash_preimage_hex: string;
  content_hash: string;
  plaintext: string;
  plaintext_hex: string;
  encryption_context: Record<string, string>;
  aad_hex: string;
  generate_data_key: { KeyId: string; Plaintext_hex: string; CiphertextBlob_base64: string };
  nonce_hex: string;
  sealed_content: Envelope;
  deflate_hex: string;
  envelope_preimage: string;
  envelope: string;
  binding: string;
  generate_mac: { KeyId: string; MacAlgorithm: string; Mac_base64: string };
  intent_mac: string;
  body: string;
}

/** A notification the producer accepts, with message body `body`. */
export function validNotification(body: string): Notification {
  return {
    challengeId: 'chal-7f3a9c01',
    channel: 'email',
    workflow: { kind: 'single' },
    destinationRef: 'acct-1001:email',
    expiresAt: new Date('2026-11-30T10:50:00Z'),
    templateId: 'reset-email',
    templateVersion: '3',
    policyVersion: 'policy-1',
    message: { to: 'player1001@example.com', subject: 'Reset your password', body },
  };
}
