// The TS SDK flow of the bunqueue tests (tests/integration/test_bunqueue_sdk.py), run by the
// pinned Bun from this directory against a server at HOST:PORT: 50 jobs with add() and 50
// with addBulk(), a worker with concurrency 4 where job 13 throws once (retried), then
// getJob().returnvalue and getJobCounts(). Prints one JSON object of what it saw.
import { Queue, Worker } from 'bunqueue/client';

const [host, port, queueName] = [process.argv[2], Number(process.argv[3]), process.argv[4]];
const connection = { host, port };
const N = 100;

const queue = new Queue(queueName, { connection });
const ids: string[] = [];
const adds = [];
for (let i = 0; i < N / 2; i++) {
  adds.push(queue.add('task', { i }, { attempts: 3, backoff: 100 }));
}
for (const job of await Promise.all(adds)) ids.push(job.id);
const bulk = await queue.addBulk(
  Array.from({ length: N / 2 }, (_, k) => ({
    name: 'task',
    data: { i: N / 2 + k },
    opts: { attempts: 3, backoff: 100 },
  })),
);
for (const job of bulk) ids.push(job.id);

const processed = new Map<number, number>();
let failedEvents = 0;
let flakyAttempts = -1;
const done = new Promise<void>((resolve) => {
  let completed = 0;
  const worker = new Worker(
    queueName,
    async (job) => {
      const i = (job.data as { i: number }).i;
      processed.set(i, (processed.get(i) ?? 0) + 1);
      if (i === 13 && processed.get(i) === 1) throw new Error('flaky once');
      if (i === 13) flakyAttempts = job.attemptsMade;
      return { double: i * 2 };
    },
    { connection, concurrency: 4 },
  );
  worker.on('failed', () => {
    failedEvents++;
  });
  worker.on('completed', async () => {
    completed++;
    if (completed === N) {
      await worker.close();
      resolve();
    }
  });
});
const timer = setTimeout(() => {
  console.log(JSON.stringify({ timeout: true, processed: processed.size }));
  process.exit(2);
}, 60000);
await done;
clearTimeout(timer);

const sample = await queue.getJob(ids[13]);
const counts = await queue.getJobCounts();
console.log(
  JSON.stringify({
    queue: queueName,
    distinct: new Set(ids).size,
    processed: processed.size,
    runs: [...processed.values()].reduce((a, b) => a + b, 0),
    failedEvents,
    flakyAttempts,
    returnvalue: sample?.returnvalue ?? null,
    counts,
  }),
);
await queue.close();
process.exit(0);
