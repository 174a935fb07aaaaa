// BullMQ end to end against a server on 127.0.0.1:PORT (run by tests/clients.rs):
// a Queue, a Worker with concurrency 4, 20 jobs computed in parallel, a delayed job, a job
// that fails once and succeeds on its retry, and QueueEvents reporting completions. Exits
// non-zero saying what failed. Usage: node bullmq_e2e.js PORT
'use strict';

const { Queue, Worker, QueueEvents } = require('bullmq');

const port = Number(process.argv[2]);
if (!port) {
  console.error('usage: node bullmq_e2e.js PORT');
  process.exit(2);
}
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
const name = `tc-e2e-${process.pid}-${Date.now()}`;
const DELAY_MS = 1500;

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function main() {
  const queue = new Queue(name, { connection });
  // One listener per waited job while the 22 jobs are awaited at once.
  queue.setMaxListeners(64);
  const events = new QueueEvents(name, { connection });
  await events.waitUntilReady();

  let running = 0;
  let maxRunning = 0;
  let flakyFailures = 0;
  const completedEvents = new Set();
  events.on('completed', ({ jobId }) => completedEvents.add(jobId));

  const worker = new Worker(
    name,
    async (job) => {
      running += 1;
      maxRunning = Math.max(maxRunning, running);
      try {
        // Long enough for the four slots to overlap.
        await new Promise((r) => setTimeout(r, 50));
        switch (job.name) {
          case 'add':
            return job.data.a + job.data.b;
          case 'flaky':
            if (job.attemptsMade === 0) throw new Error('first attempt fails');
            return 'recovered';
          case 'delayed':
            return Date.now();
          default:
            throw new Error(`unknown job ${job.name}`);
        }
      } finally {
        running -= 1;
      }
    },
    { connection, concurrency: 4 },
  );
  worker.on('failed', (job) => {
    if (job && job.name === 'flaky') flakyFailures += 1;
  });
  await worker.waitUntilReady();

  const adds = await queue.addBulk(
    Array.from({ length: 20 }, (_, i) => ({ name: 'add', data: { a: i, b: 100 } })),
  );
  const delayed = await queue.add('delayed', {}, { delay: DELAY_MS });
  const flaky = await queue.add('flaky', {}, { attempts: 3, backoff: { type: 'fixed', delay: 200 } });

  const results = await Promise.all(adds.map((j) => j.waitUntilFinished(events, 30000)));
  results.forEach((r, i) => check(r === i + 100, `add job ${i} returned ${r}`));
  check(maxRunning > 1 && maxRunning <= 4, `concurrency 4 ran ${maxRunning} jobs at once`);

  check((await flaky.waitUntilFinished(events, 30000)) === 'recovered', 'flaky job result');
  const flakyState = await queue.getJob(flaky.id);
  check(flakyState.attemptsMade === 2, `flaky job attemptsMade ${flakyState.attemptsMade}`);
  check(flakyFailures === 1, `flaky job failed ${flakyFailures} times`);

  const ranAt = await delayed.waitUntilFinished(events, 30000);
  const delayedState = await queue.getJob(delayed.id);
  check(
    ranAt - delayedState.timestamp >= DELAY_MS - 50,
    `delayed job ran ${ranAt - delayedState.timestamp} ms after it was added`,
  );

  const counts = await queue.getJobCounts('completed', 'failed', 'delayed', 'wait', 'active');
  check(counts.completed === 22, `completed count ${JSON.stringify(counts)}`);
  check(counts.failed === 0 && counts.delayed === 0 && counts.wait === 0 && counts.active === 0,
    `counts ${JSON.stringify(counts)}`);
  // QueueEvents saw every completion (it reads the events stream with XREAD BLOCK).
  for (const j of [...adds, delayed, flaky]) {
    check(completedEvents.has(j.id), `no completed event for job ${j.id}`);
  }

  await worker.close();
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  console.log(`bullmq ok: 22 jobs, max ${maxRunning} concurrent, flaky retried once, delayed ${ranAt - delayedState.timestamp} ms`);
}

const timer = setTimeout(() => {
  console.error('bullmq e2e: timed out after 60 s');
  process.exit(1);
}, 60000);
timer.unref();

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`bullmq e2e failed: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
  },
);
