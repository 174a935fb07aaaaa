// ioredis 6's Cluster (unmodified) writing keys to a tidecache cluster while it is resharded,
// run by tests/cluster_clients.rs: writes PREFIX:i = i until STOP_FILE exists, then reads
// every acknowledged write back. An error that reaches the application (ioredis follows
// MOVED and ASK itself) is a failure. Prints "acknowledged N, lost M, errors E".
// Usage: node ioredis_cluster.js PORT PREFIX STOP_FILE
'use strict';

const fs = require('fs');
const Redis = require('ioredis');

const [port, prefix, stop] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const cluster = new Redis.Cluster([{ host: '127.0.0.1', port }], {
  redisOptions: { connectTimeout: 2000 },
  slotsRefreshTimeout: 2000,
});

(async () => {
  const errors = [];
  let acked = 0;
  const deadline = Date.now() + 120000;
  for (let i = 0; !fs.existsSync(stop) && Date.now() < deadline; i++) {
    try {
      await cluster.set(`${prefix}:${i}`, String(i));
      acked = i + 1;
    } catch (e) {
      errors.push(`write ${i}: ${e.message}`);
      if (errors.length > 20) break;
    }
  }
  let lost = 0;
  for (let j = 0; j < acked; j++) {
    const v = await cluster.get(`${prefix}:${j}`);
    if (v !== String(j)) lost++;
  }
  console.log(`acknowledged ${acked}, lost ${lost}, errors ${errors.length}`);
  errors.slice(0, 20).forEach((e) => console.log(e));
  cluster.disconnect();
  process.exit(lost === 0 && errors.length === 0 ? 0 : 1);
})().catch((e) => {
  console.log(`FAIL ${e.stack}`);
  process.exit(1);
});
