// node-redis 5 (the `redis` package, unmodified, pinned in package.json) against a server on
// 127.0.0.1:PORT, run by tests/client_matrix.rs. Checks, each on what the server answered:
// - RESP3 (`RESP: 3`): HELLO 3 in the handshake, CLIENT INFO resp=3 and lib-name, a map
//   as an object, a double as a number, GEOPOS's doubles with Redis's digits;
// - multi/exec: replies, WATCH with another client's write making exec() throw WatchError,
//   then the retry succeeding; an error inside MULTI rejecting exec() with the replies;
// - pubsub over RESP2 and RESP3: subscribe/pSubscribe listeners get message and pattern
//   message, PUBLISH's receiver count, unsubscribe;
// - `sendCommand` for DOC.* (insert, find, update, findone, TTL index, delete);
// - the client-side cache (`clientSideCache` with RESP3): a repeated GET reaches the server
//   once (INFO commandstats from another connection, and the cache's own hit count),
//   another client's SET invalidates it; DOC.FINDONE declared as a CACHEABLE command of a
//   module (node-redis's public way to add commands) is cached the same way, keyed on its
//   collection, and another client's DOC.UPDATE invalidates it; FLUSHALL empties the cache.
// Exits non-zero listing what failed. Usage: node node_redis_matrix.js PORT
'use strict';

const { createClient, WatchError, RESP_TYPES } = require('redis');

const port = Number(process.argv[2]);
if (!port) {
  console.error('usage: node node_redis_matrix.js PORT');
  process.exit(2);
}
const failures = [];
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failures.push(what);
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const socket = { host: '127.0.0.1', port, reconnectStrategy: false };

async function eventually(f, ms = 2000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await f()) return true;
    await sleep(20);
  }
  return f();
}

// DOC.FINDONE as a module command: CACHEABLE and read-only, with the collection as its key
// so the cache drops the entry when the server invalidates that key.
const doc = {
  findOne: {
    CACHEABLE: true,
    IS_READ_ONLY: true,
    parseCommand(parser, collection, filter) {
      parser.push('DOC.FINDONE');
      parser.pushKey(collection);
      parser.push(filter);
    },
    transformReply: undefined,
  },
};

async function commandCalls(admin) {
  const info = await admin.info('commandstats');
  const out = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]] = Number(m[2]);
  return out;
}

async function resp3() {
  const r = createClient({ socket, RESP: 3 });
  await r.connect();
  const info = await r.sendCommand(['CLIENT', 'INFO']);
  check(/ resp=3 /.test(info), `CLIENT INFO says resp=3`);
  check(/lib-name=node-redis /.test(info), `CLIENT SETINFO LIB-NAME in the handshake (${info.trim()})`);
  const hello = await r.hello('3');
  check(hello.proto === 3 && hello.server === 'redis', `HELLO reply as a map (${JSON.stringify(hello)})`);
  await r.hSet('h', { a: '1', b: '2' });
  const map = await r.hGetAll('h');
  check(same({ ...map }, { a: '1', b: '2' }), `HGETALL (${JSON.stringify(map)})`);
  const raw = await r.sendCommand(['HGETALL', 'h']);
  check(!Array.isArray(raw) && typeof raw === 'object', `HGETALL's raw RESP3 reply is a map (${JSON.stringify(raw)})`);
  await r.zAdd('z', { score: 1.5, value: 'm' });
  const score = await r.zScore('z', 'm');
  check(score === 1.5, `ZSCORE is a RESP3 double (${JSON.stringify(score)})`);
  // GEO coordinates: Redis writes the same long-double text in both protocols (a RESP3
  // double in RESP3). node-redis parses RESP3 doubles digit by digit, so other digits
  // (even of the same value) would hand its users a number one ulp away from redis-server's.
  await r.geoAdd('g', { longitude: 13.36, latitude: 38.11, member: 'p' });
  const [pos3] = await r.sendCommand(['GEOPOS', 'g', 'p'], { typeMapping: { [RESP_TYPES.DOUBLE]: String } });
  const resp2 = createClient({ socket });
  await resp2.connect();
  const [pos2] = await resp2.sendCommand(['GEOPOS', 'g', 'p']);
  await resp2.close();
  check(
    same(pos3.map(String), pos2.map(String)) && pos2[0] === '13.35999995470046997',
    `GEOPOS: the RESP3 doubles carry RESP2's digits (${JSON.stringify(pos3)} vs ${JSON.stringify(pos2)})`,
  );
  await r.close();
}

async function transactions(admin) {
  const r = createClient({ socket, RESP: 3 });
  await r.connect();
  const res = await r.multi().set('k', '1').incr('k').get('k').exec();
  check(same(res, ['OK', 2, '2']), `multi/exec replies (${JSON.stringify(res)})`);

  let attempts = 0;
  for (;;) {
    attempts += 1;
    await r.watch('counter');
    const n = Number((await r.get('counter')) || 0);
    if (attempts === 1) await admin.set('counter', '100');
    try {
      await r.multi().set('counter', String(n + 1)).exec();
      break;
    } catch (e) {
      if (!(e instanceof WatchError) || attempts > 3) throw e;
    }
  }
  check(attempts === 2, `WATCH: the first exec threw WatchError, the retry ran (${attempts} attempts)`);
  check((await r.get('counter')) === '101', 'the retry wrote on top of the other write');

  let err;
  try {
    await r.multi().set('s', 'abc').incr('s').get('s').exec();
  } catch (e) {
    err = e;
  }
  check(
    err && Array.isArray(err.replies) && err.replies[0] === 'OK' && err.replies[2] === 'abc'
      && err.errorIndexes && err.errorIndexes[0] === 1,
    `an error inside MULTI: exec rejects with the replies and the failed index (${err && err.message})`,
  );
  await r.close();
}

async function pubsub(admin, RESP) {
  const sub = createClient({ socket, RESP });
  await sub.connect();
  const got = [];
  await sub.subscribe('news.tech', (message, channel) => got.push(['message', channel, message]));
  await sub.pSubscribe('news.*', (message, channel) => got.push(['pmessage', channel, message]));
  const receivers = await admin.publish('news.tech', 'hello');
  check(receivers === 2, `RESP${RESP}: PUBLISH reaches channel and pattern (${receivers})`);
  await eventually(() => got.length >= 2);
  const sorted = got.slice().sort((a, b) => a[0].localeCompare(b[0]));
  check(
    same(sorted, [['message', 'news.tech', 'hello'], ['pmessage', 'news.tech', 'hello']]),
    `RESP${RESP}: the listeners got message and pattern message (${JSON.stringify(got)})`,
  );
  await sub.unsubscribe('news.tech');
  await sub.pUnsubscribe('news.*');
  check((await admin.publish('news.tech', 'late')) === 0, `RESP${RESP}: nobody receives after unsubscribe`);
  // node-redis 5 hands this PONG back as a Buffer over RESP2 (against redis-server too).
  check(String(await sub.ping()) === 'PONG', `RESP${RESP}: the connection left subscriber mode`);
  await sub.close();
}

async function documents() {
  const r = createClient({ socket, RESP: 3 });
  await r.connect();
  await r.flushAll();
  const ids = await r.sendCommand([
    'DOC.INSERT', 'users',
    JSON.stringify({ _id: 1, name: 'ada', age: 36 }),
    JSON.stringify({ _id: 2, name: 'bob', age: 17 }),
  ]);
  check(same(ids, ['1', '2']), `DOC.INSERT replies the _ids (${JSON.stringify(ids)})`);
  const found = (await r.sendCommand(['DOC.FIND', 'users', '{"age":{"$lt":18}}'])).map((d) => JSON.parse(d));
  check(same(found, [{ _id: 2, name: 'bob', age: 17 }]), `DOC.FIND with a filter (${JSON.stringify(found)})`);
  const upd = await r.sendCommand(['DOC.UPDATE', 'users', '{"_id":3}', '{"$set":{"name":"cy"}}', 'UPSERT']);
  check(same(upd, [0, 0, '3']), `DOC.UPDATE UPSERT replies the new _id (${JSON.stringify(upd)})`);
  const one = JSON.parse(await r.sendCommand(['DOC.FINDONE', 'users', '{"_id":3}']));
  check(same(one, { _id: 3, name: 'cy' }), `DOC.FINDONE (${JSON.stringify(one)})`);
  await r.sendCommand([
    'DOC.INSERT', 'sessions',
    JSON.stringify({ _id: 'old', at: { $date: new Date(Date.now() - 3600e3).toISOString() } }),
    JSON.stringify({ _id: 'new', at: { $date: new Date().toISOString() } }),
  ]);
  check((await r.sendCommand(['DOC.EXPIREINDEX', 'sessions', 'at', '600'])) === 'at_1', 'DOC.EXPIREINDEX');
  check((await r.sendCommand(['DOC.COUNT', 'sessions', '{}'])) === 1, 'a due document is hidden at once');
  check((await r.sendCommand(['DOC.DELETE', 'users', '{"_id":{"$in":[1,2]}}'])) === 2, 'DOC.DELETE with $in');
  await r.close();
}

async function clientSideCache(admin) {
  await admin.flushAll();
  await admin.set('greeting', 'v1');
  await admin.sendCommand(['DOC.INSERT', 'users', '{"_id":1,"name":"ada"}']);
  const c = createClient({
    socket,
    RESP: 3,
    clientSideCache: { ttl: 0, maxEntries: 0 },
    modules: { doc },
  });
  await c.connect();
  const tracking = await c.sendCommand(['CLIENT', 'TRACKINGINFO']);
  check(JSON.stringify(tracking).includes('"on"'), `the cache turned tracking on (${JSON.stringify(tracking)})`);

  const get = () => c.get('greeting');
  const find = async () => {
    const d = await c.doc.findOne('users', '{"_id":1}');
    return d ? JSON.parse(d).name : null;
  };
  await admin.configResetStat();
  const values = [];
  for (let i = 0; i < 3; i++) values.push([await get(), await find()]);
  check(same(values, [['v1', 'ada'], ['v1', 'ada'], ['v1', 'ada']]), `cached reads (${JSON.stringify(values)})`);
  let calls = await commandCalls(admin);
  check(calls.get === 1, `3 GETs, ${calls.get} reached the server`);
  check(calls['doc.findone'] === 1, `3 DOC.FINDONEs, ${calls['doc.findone']} reached the server`);
  const stats = c.clientSideCache.stats();
  check(stats.hitCount === 4 && stats.missCount === 2, `the cache counted 4 hits, 2 misses (${stats.hitCount}, ${stats.missCount})`);

  await admin.set('greeting', 'v2');
  check(await eventually(async () => (await get()) === 'v2'), "another client's SET invalidates the cached GET");
  calls = await commandCalls(admin);
  check((await find()) === 'ada' && (await commandCalls(admin))['doc.findone'] === calls['doc.findone'],
    'the document stays cached after SET');
  await admin.sendCommand(['DOC.UPDATE', 'users', '{"_id":1}', '{"$set":{"name":"grace"}}']);
  check(await eventually(async () => (await find()) === 'grace'),
    "another client's DOC.UPDATE invalidates the cached DOC.FINDONE");
  calls = await commandCalls(admin);
  await get();
  await find();
  const after = await commandCalls(admin);
  check(after.get === calls.get && after['doc.findone'] === calls['doc.findone'], 'both are cached again');

  await admin.flushAll();
  check(await eventually(async () => (await get()) === null), 'FLUSHALL (a null invalidation) empties the cache');
  await c.close();
}

async function main() {
  const admin = createClient({ socket });
  await admin.connect();
  await admin.flushAll();
  await resp3();
  await transactions(admin);
  await pubsub(admin, 2);
  await pubsub(admin, 3);
  await documents();
  await clientSideCache(admin);
  await admin.close();
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
