// Test helpers: the vector files and fake AWS clients.
import { readFileSync } from 'node:fs';

import { GenerateDataKeyCommand } from '@aws-sdk/client-kms';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import type { DataKeyClient, Notification, QueueClient } from '@resetledger/producer';

/** testdata/vectors of the repository (this package is producers/node). */
export const vectorsDir = new URL('../../../../testdata/vectors/', import.meta.url);

export function loadVectors<T>(name: string): T {
  return JSON.parse(readFileSync(new URL(name, vectorsDir), 'utf8')) as T;
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
    expiresAt: v.expires_at === '' ? undefined : new Date(v.expires_at),
    templateId: v.template_id,
    templateVersion: v.template_version,
    policyVersion: v.policy_version,
    message: { to: text(v.message.to), subject: text(v.message.subject), body: text(v.message.body) },
  };
  return n as unknown as Notification;
}

/** A KMS stand-in that hands out the given data key (or fails with err). */
export class FakeKMS {
  calls = 0;
  handed: Uint8Array[] = [];
  inputs: unknown[] = [];
  constructor(
    private readonly key: { plaintext: Uint8Array; blob: Uint8Array; keyId: string },
    private readonly err?: Error,
  ) {}

  async send(cmd: unknown): Promise<unknown> {
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

  client(): DataKeyClient {
    return this as unknown as DataKeyClient;
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
