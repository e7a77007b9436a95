// loom.assistant against the live Loom, whose assistant answers from the LibreChat emulator
// (a greeting; `[help]`: a docs search and a cited answer; `[slow]`: words until stopped).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Loom, LoomError } from '../dist/index.js';
import { EMULATOR_URL, scoped, URL_ } from './helpers.js';

const GREETING = 'Hello! Ask me about this namespace.';
const ask = (content) => [{ role: 'user', content }];

async function emulatorAborted() {
  return (await (await fetch(`${EMULATOR_URL}/_test/state`)).json()).aborted;
}

test('iterating a stream yields the text deltas; final() has the checked citations, support and steps', async () => {
  const { loom } = await scoped('viewer');
  const stream = loom.assistant.stream({ messages: ask('hello') });
  const deltas = [];
  for await (const delta of stream) deltas.push(delta);
  assert.equal(deltas.join(''), GREETING);
  const answer = await stream.final();
  assert.equal(answer.text, GREETING);
  assert.deepEqual(answer.citations, []);
  assert.equal(answer.support, 'none');
  assert.deepEqual(stream.steps, []);
  assert.ok(answer.runId.startsWith('chatcmpl-'));
  assert.equal(answer.aborted, false);
});

test('events(): steps while it reads, text_done before the checks, then citations; each step is a loom.step', async () => {
  const { loom } = await scoped('viewer');
  const stream = loom.assistant.stream({ messages: ask('[help] how is support decided?') });
  const kinds = [];
  const steps = [];
  let citations;
  for await (const event of stream.events()) {
    kinds.push(event.type);
    if (event.type === 'step') steps.push(event.step);
    if (event.type === 'citations') citations = event;
  }
  assert.ok(!kinds.includes('error'), kinds.join(','));
  assert.ok(kinds.indexOf('text_done') > kinds.lastIndexOf('text'), kinds.join(','));
  assert.equal(kinds[kinds.length - 1], 'citations');
  const [cite] = citations.citations;
  assert.equal(cite.kind, 'help');
  assert.equal(cite.verified, true);
  assert.ok(cite.anchor);
  assert.equal(citations.support, stream.support);
  // The final list (the one read after the answer) names the docs search it made.
  assert.deepEqual(stream.steps.map((s) => s.op), ['help.search']);
  assert.equal(stream.steps[0].text, "Searched Loom's documentation");
  for (const step of steps) assert.equal(step.op, 'help.search');
  const answer = await stream.final();
  assert.match(answer.text, /^Support is decided by a table \[help:/);
  assert.equal(answer.citations.length, 1);
});

test('ask() gives the whole answer with citations and support and no steps', async () => {
  const { loom } = await scoped('viewer');
  const answer = await loom.assistant.ask({ messages: ask('hello') });
  assert.equal(answer.text, GREETING);
  assert.equal(answer.support, 'none');
  assert.deepEqual(answer.citations, []);
  assert.equal(answer.steps, undefined);
  const viaOp = await loom.assistant.ask({ question: 'hello' });
  assert.equal(viaOp.text, GREETING);
});

test('aborting the signal stops the stream and closes the request upstream', async () => {
  const { loom } = await scoped('viewer');
  await fetch(`${EMULATOR_URL}/_test/reset`, { method: 'POST' });
  const controller = new AbortController();
  const stream = loom.assistant.stream({ messages: ask('[slow] talk for a while'), signal: controller.signal });
  let n = 0;
  for await (const delta of stream) {
    assert.match(delta, /^word\d+ $/);
    if (++n === 3) controller.abort();
  }
  const answer = await stream.final();
  assert.equal(answer.aborted, true);
  assert.equal(answer.citations, undefined);
  assert.ok(answer.text.startsWith('word0 word1 word2 '));
  // LibreChat (the emulator) sees its request closed: the run is aborted, not left to spend.
  for (let i = 0; i < 600 && !(await emulatorAborted()); i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal(await emulatorAborted(), true);
});

test('breaking out of the loop stops the request too', async () => {
  const { loom } = await scoped('viewer');
  await fetch(`${EMULATOR_URL}/_test/reset`, { method: 'POST' });
  const stream = loom.assistant.stream({ messages: ask('[slow] more') });
  for await (const delta of stream) {
    assert.ok(delta);
    break;
  }
  assert.equal((await stream.final()).aborted, true);
  for (let i = 0; i < 600 && !(await emulatorAborted()); i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal(await emulatorAborted(), true);
});

test('a refused request is an error event, a throw from the iterator and a rejected final()', async () => {
  const { loom } = await scoped('viewer');
  // The last message must be the user's question.
  const bad = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }];
  const events = [];
  for await (const event of loom.assistant.stream({ messages: bad }).events()) events.push(event);
  assert.equal(events.length, 1);
  assert.equal(events[0].type, 'error');
  assert.ok(events[0].error instanceof LoomError);
  assert.equal(events[0].error.code, 'VALIDATION_FAILED');
  assert.equal(events[0].error.status, 422);
  assert.equal(events[0].error.detail.field, 'messages');
  const stream = loom.assistant.stream({ messages: bad });
  await assert.rejects(async () => {
    for await (const _ of stream) assert.fail('no text');
  }, (e) => e instanceof LoomError && e.code === 'VALIDATION_FAILED');
  await assert.rejects(stream.final(), (e) => e.code === 'VALIDATION_FAILED');
});

test('an org-wide token is refused before anything is asked (the assistant answers on one namespace)', async () => {
  const { admin } = await import('./helpers.js');
  const stream = admin().assistant.stream({ messages: ask('hello') });
  await assert.rejects(stream.final(), (e) => e instanceof LoomError && e.status === 403 && e.detail.reason === 'org_wide');
});

test('the browser session: the cookie and the CSRF header on the POST, and no CSRF is refused', async () => {
  const code = process.env.LOOM_TEST_LOGIN_CODE;
  assert.ok(code, 'LOOM_TEST_LOGIN_CODE is set by the pytest wrapper');
  const login = await fetch(`${URL_}/v1/session/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ code }),
  });
  assert.equal(login.status, 200, await login.clone().text());
  const session = await login.json();
  const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  // What a browser adds to a same-origin request: its cookie, and its origin on a POST.
  const browserFetch = (url, init = {}) => fetch(url, { ...init, headers: { ...init.headers, Cookie: cookie, Origin: URL_ } });
  const ns = process.env.LOOM_TEST_SESSION_NAMESPACE;
  const page = new Loom({ baseUrl: URL_, csrfToken: () => session.csrf_token, namespace: () => ns, fetch: browserFetch });
  const answer = await page.assistant.stream({ messages: ask('hello') }).final();
  assert.equal(answer.text, GREETING);
  const noCsrf = new Loom({ baseUrl: URL_, namespace: () => ns, fetch: browserFetch });
  await assert.rejects(noCsrf.assistant.stream({ messages: ask('hello') }).final(), (e) => e instanceof LoomError && e.status === 403);
});

test("an answer past its limit ends with the stream's loom.error: an error event after the text, and final() rejects", async () => {
  const { loom } = await scoped('viewer');
  const stream = loom.assistant.stream({ messages: ask('[slow] until the limit') });
  const kinds = new Set();
  let error;
  for await (const event of stream.events()) {
    kinds.add(event.type);
    if (event.type === 'error') error = event.error;
  }
  assert.deepEqual([...kinds], ['text', 'error']);
  assert.ok(error instanceof LoomError);
  assert.equal(error.code, 'OVERLOADED');
  assert.equal(error.status, 503);
  assert.equal(error.detail.reason, 'answer_ttl');
  assert.equal(error.retryable, true);
  await assert.rejects(stream.final(), (e) => e === error);
  assert.ok(stream.text.startsWith('word0 '));
  assert.equal(stream.citations, undefined);
});
