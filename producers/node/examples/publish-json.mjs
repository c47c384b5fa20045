#!/usr/bin/env node
// Publishes the notifications given as a JSON array on stdin, one after the
// other, and prints a JSON array with the outcome of each on stdout: what an
// account service's batch job or smoke test would do, and what the
// repository's end-to-end test runs against a deployed stack.
//
//   INTENT_QUEUE_URL=... CONTENT_KEY_ARN=... INTENT_KEY_ARN=... node examples/publish-json.mjs < notifications.json
//
// Each notification is the package's Notification with expiresAt (and
// issuedAt, optional: the producer's clock when left out) as RFC 3339
// strings. The messages (addresses, reset links) come on stdin, not
// in arguments, so no process listing shows them; the output holds only
// ids, keys and hashes, never a message.
import { text } from 'node:stream/consumers';

import { formatTime, Producer, ProducerError } from '@resetledger/producer';

const queueUrl = process.env.INTENT_QUEUE_URL;
const keyId = process.env.CONTENT_KEY_ARN;
const intentKeyArn = process.env.INTENT_KEY_ARN;
if (!queueUrl || !keyId || !intentKeyArn) {
  console.error('publish-json: set INTENT_QUEUE_URL, CONTENT_KEY_ARN and INTENT_KEY_ARN');
  process.exit(2);
}

const producer = new Producer({ queueUrl, keyId, intentKeyArn });
const notifications = JSON.parse(await text(process.stdin));
const results = [];
let failed = 0;
for (const n of notifications) {
  const id = { challengeId: n.challengeId, channel: n.channel };
  try {
    const r = await producer.publish({ ...n, expiresAt: new Date(n.expiresAt), issuedAt: n.issuedAt ? new Date(n.issuedAt) : undefined });
    results.push({ ...id, ...r, issuedAt: formatTime(r.issuedAt) });
  } catch (err) {
    if (!(err instanceof ProducerError)) throw err;
    failed++;
    results.push({ ...id, error: { name: err.name, code: err.code, field: err.field, reason: err.reason, message: err.message } });
  }
}
process.stdout.write(JSON.stringify(results, null, 2) + '\n');
process.exitCode = failed === 0 ? 0 : 1;
