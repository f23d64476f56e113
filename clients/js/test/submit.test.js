// submit() and postBatch() against a scripted fetch: the body format, retries with the same batch id
// on network errors, 429 and 5xx only, backoff doubling to its cap, final refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClientError, batchBody, isRetryStatus, postBatch, submit } from '../src/index.js';
import { ChaCha20Source } from '../src/testing.js';

function scripted(answers) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, init, body: JSON.parse(init.body) });
    const a = answers[Math.min(calls.length - 1, answers.length - 1)];
    if (a instanceof Error) throw a;
    return new Response(JSON.stringify(a.body ?? {}), { status: a.status });
  };
  return { fetch, calls };
}

const fast = { backoff: 0.001, maxBackoff: 0.004 };

test('the batch body writes big integers in full and pm floats as Python does', () => {
  const body = batchBody([{ mechanism: 'olh(k=100,eps=2.0)', reports: [2n ** 60n + 1n, 7] }, { mechanism: 'pm(k=10,eps=1.0)', reports: [1, -0.5] }], 'b-1');
  assert.equal(body, '{"batch_id":"b-1","groups":[{"mechanism":"olh(k=100,eps=2.0)","reports":[1152921504606846977,7]},{"mechanism":"pm(k=10,eps=1.0)","reports":[1.0,-0.5]}]}');
});

test('retries 5xx, 429 and network errors with the same batch id, then succeeds', async () => {
  const { fetch, calls } = scripted([{ status: 503 }, new TypeError('fetch failed'), { status: 429 }, { status: 200, body: { status: 'accepted', reports: 2 } }]);
  const res = await postBatch({ url: 'http://127.0.0.1:9/', collection: 'ages', token: 't0k', groups: { mechanism: 'krr(k=10,eps=1.0)', reports: [1, 2] }, fetch, ...fast });
  assert.equal(res.status, 'accepted');
  assert.equal(calls.length, 4);
  assert.equal(new Set(calls.map((c) => c.body.batch_id)).size, 1);
  assert.equal(calls[0].url, 'http://127.0.0.1:9/v1/collections/ages/batches');
  assert.equal(calls[0].init.headers.Authorization, 'Bearer t0k');
  assert.equal(calls[0].init.method, 'POST');
});

test('other refusals are final, with the server message', async () => {
  for (const status of [401, 403, 409, 413, 422]) {
    const { fetch, calls } = scripted([{ status, body: { error: 'no such thing' } }]);
    await assert.rejects(postBatch({ url: 'http://x', collection: 'c', token: 't', groups: [], fetch, ...fast }),
      (e) => e instanceof ClientError && e.message === `server refused (${status}): no such thing`);
    assert.equal(calls.length, 1);
  }
  assert.deepEqual([200, 404, 429, 500, 502, 503, 504, 599].map(isRetryStatus), [false, false, true, true, true, true, true, true]);
});

test('gives up after retries + 1 attempts', async () => {
  const { fetch, calls } = scripted([{ status: 502 }]);
  const waits = [];
  await assert.rejects(postBatch({ url: 'http://x', collection: 'c', token: 't', groups: [], fetch, retries: 3, ...fast, onAttempt: (a) => waits.push(a) }),
    /failed after 4 attempts: HTTP 502/);
  assert.equal(calls.length, 4);
  assert.deepEqual(waits, [0, 1, 2, 3]);
});

test('submit perturbs here and posts batches of batchSize with distinct ids', async () => {
  const { fetch, calls } = scripted([{ status: 200, body: { status: 'accepted' } }]);
  const values = Array.from({ length: 25 }, (_, i) => String(i % 10));
  const res = await submit({ url: 'http://x', collection: 'c', token: 't', spec: 'krr(eps=2.0)', domain: '0..9', values, batchSize: 10, fetch, source: new ChaCha20Source('s'), ...fast });
  assert.deepEqual(res, { reports: 25, batches: 3, duplicates: 0, memos: [] });
  assert.deepEqual(calls.map((c) => c.body.groups[0].reports.length), [10, 10, 5]);
  assert.equal(new Set(calls.map((c) => c.body.batch_id)).size, 3);
  assert.ok(calls.every((c) => /^[0-9a-f]{32}$/.test(c.body.batch_id) && c.body.groups[0].mechanism === 'krr(k=10,eps=2.0)'));
  // a bad value refuses everything before any request
  await assert.rejects(submit({ url: 'http://x', collection: 'c', token: 't', spec: 'krr(eps=2.0)', domain: '0..9', values: ['1', '99'], fetch }), /value\.out_of_domain: line 2/);
  assert.equal(calls.length, 3);
});

test('unknown options are refused', async () => {
  const { fetch, calls } = scripted([{ status: 200, body: { status: 'accepted' } }]);
  await assert.rejects(submit({ url: 'http://x', collection: 'c', token: 't', spec: 'krr(eps=2.0)', domain: '0..9', values: ['1'], batchsize: 5, fetch }),
    /submit: unknown option "batchsize"/);
  await assert.rejects(postBatch({ url: 'http://x', collection: 'c', token: 't', groups: [], retry: 1, fetch }), /postBatch: unknown option "retry"/);
  assert.equal(calls.length, 0);
});
