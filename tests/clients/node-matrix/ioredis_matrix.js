// ioredis 6 (unmodified, pinned in package.json) against a server on 127.0.0.1:PORT, run by
// tests/client_matrix.rs. Checks, each on what the server answered:
// - RESP3: ioredis 6 handshakes with HELLO 3 by default; CLIENT INFO shows resp=3; with
//   replyMapping "resp3" a map arrives as an object and a double as a number;
// - multi/exec: replies per command, an error inside MULTI in its slot, WATCH with another
//   client's write making EXEC return null, then the retry succeeding; a 1000-command
//   pipeline;
// - pubsub over RESP2 and RESP3: subscribe/psubscribe counts, message and pmessage events,
//   PUBLISH's receiver count, unsubscribe; under RESP3 the subscribed connection still runs
//   ordinary commands (RESP3 allows it);
// - `call` for DOC.* (insert, find, update, findone, TTL index, delete).
// ioredis has no client-side cache. Exits non-zero listing what failed.
// Usage: node ioredis_matrix.js PORT
'use strict';

const Redis = require('ioredis');

const port = Number(process.argv[2]);
if (!port) {
  console.error('usage: node ioredis_matrix.js PORT');
  process.exit(2);
}
const failures = [];
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failures.push(what);
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const opts = (extra = {}) => ({ host: '127.0.0.1', port, lazyConnect: true, ...extra });

async function waitFor(f, ms = 2000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (f()) return true;
    await sleep(10);
  }
  return f();
}

async function resp3(admin) {
  const r = new Redis(opts({ replyMapping: 'resp3' }));
  await r.connect();
  check(r.condition.protocol === 3, `ioredis negotiated protocol ${r.condition.protocol}`);
  const info = await r.client('INFO');
  check(/ resp=3 /.test(info), `CLIENT INFO says resp=3 (${info.trim()})`);
  const lib = /lib-name=(\S+)/.exec(info);
  check(lib && lib[1] === 'ioredis', `CLIENT SETINFO LIB-NAME sent by the handshake (${lib && lib[1]})`);
  await r.hset('h', 'a', '1', 'b', '2');
  const map = await r.call('HGETALL', 'h');
  check(same(map, { a: '1', b: '2' }), `HGETALL is a RESP3 map (${JSON.stringify(map)})`);
  await r.zadd('z', '1.5', 'm');
  const score = await r.call('ZSCORE', 'z', 'm');
  check(score === 1.5, `ZSCORE is a RESP3 double (${JSON.stringify(score)})`);
  check((await r.get('nope')) === null, 'GET of a missing key is null');
  r.disconnect();
}

async function transactions(admin) {
  const r = new Redis(opts());
  await r.connect();
  const res = await r.multi().set('k', '1').incr('k').get('k').exec();
  check(same(res, [[null, 'OK'], [null, 2], [null, '2']]), `multi/exec replies (${JSON.stringify(res)})`);

  const bad = await r.multi().set('s', 'abc').incr('s').append('s', 'd').exec();
  check(
    bad[0][1] === 'OK' && bad[1][0] instanceof Error && /not an integer/.test(bad[1][0].message) && bad[2][1] === 4,
    `an error inside MULTI stays in its slot (${JSON.stringify(bad.map(([e, v]) => (e ? e.message : v)))})`,
  );

  let attempts = 0;
  let final;
  for (;;) {
    attempts += 1;
    await r.watch('counter');
    const n = Number((await r.get('counter')) || 0);
    if (attempts === 1) await admin.set('counter', 100);
    final = await r.multi().set('counter', n + 1).exec();
    if (final !== null) break;
    if (attempts > 3) break;
  }
  check(attempts === 2, `WATCH: the first EXEC returned null, the retry ran (${attempts} attempts)`);
  check((await r.get('counter')) === '101', 'the retry wrote on top of the other write');

  const p = r.pipeline();
  for (let i = 0; i < 1000; i++) p.rpush('list', String(i));
  const out = await p.exec();
  check(out.length === 1000 && out[999][1] === 1000, '1000-command pipeline');
  r.disconnect();
}

async function pubsub(admin, protocol) {
  const sub = new Redis(opts({ protocol }));
  await sub.connect();
  const got = [];
  sub.on('message', (channel, message) => got.push(['message', channel, message]));
  sub.on('pmessage', (pattern, channel, message) => got.push(['pmessage', pattern, channel, message]));
  const n1 = await sub.subscribe('news.tech');
  const n2 = await sub.psubscribe('news.*');
  check(n1 === 1 && n2 === 2, `RESP${protocol}: subscribe/psubscribe counts (${n1}, ${n2})`);
  const receivers = await admin.publish('news.tech', 'hello');
  check(receivers === 2, `RESP${protocol}: PUBLISH reaches channel and pattern (${receivers})`);
  await waitFor(() => got.length >= 2);
  const sorted = got.slice().sort((a, b) => a[0].localeCompare(b[0]));
  check(
    same(sorted, [['message', 'news.tech', 'hello'], ['pmessage', 'news.*', 'news.tech', 'hello']]),
    `RESP${protocol}: message and pmessage (${JSON.stringify(got)})`,
  );
  if (protocol === 3) {
    // RESP3 lets a subscribed connection run ordinary commands.
    await admin.set('plain', 'v');
    check((await sub.get('plain')) === 'v', 'RESP3: GET on the subscribed connection');
  }
  const left = await sub.unsubscribe('news.tech');
  const pleft = await sub.punsubscribe('news.*');
  check(left === 1 && pleft === 0, `RESP${protocol}: unsubscribe counts (${left}, ${pleft})`);
  check((await admin.publish('news.tech', 'late')) === 0, `RESP${protocol}: nobody receives after unsubscribe`);
  check((await sub.ping()) === 'PONG', `RESP${protocol}: the connection left subscriber mode`);
  sub.disconnect();
}

async function documents(admin) {
  const r = new Redis(opts());
  await r.connect();
  await r.flushall();
  const ids = await r.call(
    'DOC.INSERT', 'users',
    JSON.stringify({ _id: 1, name: 'ada', age: 36 }),
    JSON.stringify({ _id: 2, name: 'bob', age: 17 }),
  );
  check(same(ids, ['1', '2']), `DOC.INSERT replies the _ids (${JSON.stringify(ids)})`);
  const found = (await r.call('DOC.FIND', 'users', '{"age":{"$gte":18}}')).map((d) => JSON.parse(d));
  check(same(found, [{ _id: 1, name: 'ada', age: 36 }]), `DOC.FIND with a filter (${JSON.stringify(found)})`);
  const upd = await r.call('DOC.UPDATE', 'users', '{"_id":2}', '{"$set":{"age":18}}');
  check(same(upd, [1, 1, null]), `DOC.UPDATE replies [matched, modified, upserted] (${JSON.stringify(upd)})`);
  const one = JSON.parse(await r.call('DOC.FINDONE', 'users', '{"_id":2}'));
  check(one.age === 18, `DOC.FINDONE sees the update (${JSON.stringify(one)})`);
  const past = new Date(Date.now() - 3600e3).toISOString();
  const future = new Date(Date.now() + 3600e3).toISOString();
  await r.call(
    'DOC.INSERT', 'sessions',
    JSON.stringify({ _id: 'old', at: { $date: past } }),
    JSON.stringify({ _id: 'new', at: { $date: future } }),
  );
  check((await r.call('DOC.EXPIREINDEX', 'sessions', 'at', '60')) === 'at_1', 'DOC.EXPIREINDEX names the index');
  const alive = (await r.call('DOC.FIND', 'sessions', '{}')).map((d) => JSON.parse(d)._id);
  check(same(alive, ['new']), `a due document is hidden at once (${JSON.stringify(alive)})`);
  check((await r.call('DOC.DELETE', 'users', '{}')) === 2, 'DOC.DELETE replies the count');
  check((await r.call('DOC.COUNT', 'users', '{}')) === 0, 'DOC.COUNT after the delete');
  // A DOC.* command inside MULTI, queued and executed with the rest.
  const tx = await r.multi().call('DOC.INSERT', 'users', '{"_id":7}').call('DOC.COUNT', 'users', '{}').exec();
  check(same(tx, [[null, ['7']], [null, 1]]), `DOC.* inside MULTI (${JSON.stringify(tx)})`);
  r.disconnect();
}

async function main() {
  const admin = new Redis(opts({ protocol: 2 }));
  await admin.connect();
  await admin.flushall();
  await resp3(admin);
  await transactions(admin);
  await pubsub(admin, 2);
  await pubsub(admin, 3);
  await documents(admin);
  admin.disconnect();
}

main()
  .catch((e) => {
    failures.push(`exception: ${e && e.stack ? e.stack : e}`);
    console.log(`FAIL exception: ${e && e.stack ? e.stack : e}`);
  })
  .finally(() => {
    if (failures.length) {
      console.log(`${failures.length} check(s) failed:\n  ${failures.join('\n  ')}`);
      process.exit(1);
    }
    console.log('all checks passed');
    process.exit(0);
  });
