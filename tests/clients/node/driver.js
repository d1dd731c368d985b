'use strict';
// The client matrix's Node driver: the common beanstalk flows through fivebeans (npm, pinned in
// package.json / package-lock.json), unmodified. Usage: node driver.js HOST PORT PREFIX
//
// Every check is recorded as key => what the client returned; the first mismatch exits 1 with
// a message on stderr. On success the last line on stdout is the JSON
// {"client": ..., "checks": {...}} that tests/clients/test_clients.py compares with the same
// expectations for every client. The scenario is the one of tests/clients/README.md.

const FiveBeans = require('fivebeans');
const { version } = require('fivebeans/package.json');

const BODY = 'hello\r\nworld';
const checks = {};

function fail(message) {
  process.stderr.write(
    `fivebeans driver: MISMATCH: ${message}\nchecks so far: ${JSON.stringify(checks)}\n`);
  process.exit(1);
}

function norm(value) {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return JSON.stringify(value.map(norm));
  return String(value);
}

// Record what the client returned for key; exit 1 if it is not expected.
function check(key, actual, expected) {
  checks[key] = actual;
  if (norm(actual) !== norm(expected)) {
    fail(`${key}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => Number(process.hrtime.bigint()) / 1e9;

async function main() {
  if (process.argv.length !== 5) {
    process.stderr.write('usage: node driver.js HOST PORT PREFIX\n');
    process.exit(2);
  }
  const [host, port, prefix] = process.argv.slice(2);
  const ta = `${prefix}a`;
  const tb = `${prefix}b`;

  const client = new FiveBeans.client(host, Number(port));
  await new Promise((resolve, reject) => {
    client.on('connect', resolve).on('error', reject);
    client.connect();
  });

  // The client's API, promisified: resolves with the callback's values, rejects with the
  // client's error (the server's answer word: 'TIMED_OUT', 'NOT_FOUND', 'NOT_IGNORED', ...).
  const call = (method, ...args) => new Promise((resolve, reject) => {
    client[method](...args, (err, ...values) => (err ? reject(err) : resolve(values)));
  });
  const one = async (method, ...args) => (await call(method, ...args))[0];
  // The client's error word for a call that should fail, or null when it succeeded.
  const errorOf = async (method, ...args) => {
    try {
      await call(method, ...args);
      return null;
    } catch (err) {
      return err;
    }
  };
  // reserve-with-timeout: [id, body] or null for the client's timeout answer.
  const reserveWithTimeout = async (seconds) => {
    try {
      const [id, body] = await call('reserve_with_timeout', seconds);
      return { id, body: body.toString() };
    } catch (err) {
      if (err === 'TIMED_OUT') return null;
      throw err;
    }
  };
  const peek = async (method, ...args) => {
    try {
      const [id, body] = await call(method, ...args);
      return { id, body: body.toString() };
    } catch (err) {
      if (err === 'NOT_FOUND') return null;
      throw err;
    }
  };

  // put / reserve / delete
  await call('use', ta);
  check('use.used', await one('list_tube_used'), ta);
  const id1 = await one('put', 100, 0, 30, BODY);
  let sj = await one('stats_job', id1);
  check('put.stats_job.tube', sj.tube, ta);
  check('put.stats_job.state', sj.state, 'ready');
  check('put.stats_job.pri', sj.pri, 100);
  check('put.stats_job.ttr', sj.ttr, 30);
  let st = await one('stats_tube', ta);
  check('put.stats_tube.name', st.name, ta);
  check('put.stats_tube.current_jobs_ready', st['current-jobs-ready'], 1);
  check('put.stats_tube.current_jobs_urgent', st['current-jobs-urgent'], 1);
  check('put.stats_tube.total_jobs', st['total-jobs'], 1);
  let found = await peek('peek_ready');
  check('put.peek_ready.same_id', found !== null && found.id === id1, true);
  check('put.peek_ready.body', found.body, BODY);
  check('put.peek_id.body', (await peek('peek', id1)).body, BODY);
  await call('watch', ta);
  await call('ignore', 'default');
  check('watch.watched', await one('list_tubes_watched'), [ta]);
  const [rid, rbody] = await call('reserve');
  check('reserve.same_id', rid === id1, true);
  check('reserve.body', rbody.toString(), BODY);
  sj = await one('stats_job', id1);
  check('reserve.stats_job.state', sj.state, 'reserved');
  check('reserve.stats_job.reserves', sj.reserves, 1);
  check('reserve.stats_tube.current_jobs_reserved',
    (await one('stats_tube', ta))['current-jobs-reserved'], 1);
  await call('destroy', id1);
  check('delete.stats_job.not_found', (await errorOf('stats_job', id1)) === 'NOT_FOUND', true);
  check('delete.stats_tube.current_jobs_ready',
    (await one('stats_tube', ta))['current-jobs-ready'], 0);

  // reserve with timeout: the timeout answer
  let t0 = now();
  const none = await reserveWithTimeout(1);
  let waited = now() - t0;
  check('timeout.timed_out', none === null, true);
  check('timeout.waited', waited >= 0.9 && waited < 5, true);

  // delayed put: not reservable before its delay, reservable after
  t0 = now();
  const id2 = await one('put', 200, 1, 30, 'later');
  sj = await one('stats_job', id2);
  check('delayed.stats_job.state', sj.state, 'delayed');
  check('delayed.stats_job.delay', sj.delay, 1);
  check('delayed.stats_tube.current_jobs_delayed',
    (await one('stats_tube', ta))['current-jobs-delayed'], 1);
  found = await peek('peek_delayed');
  check('delayed.peek_delayed.same_id', found !== null && found.id === id2, true);
  check('delayed.peek_ready.none', (await peek('peek_ready')) === null, true);
  check('delayed.reserve_before.timed_out', (await reserveWithTimeout(0)) === null, true);
  let job = await reserveWithTimeout(5);
  waited = now() - t0;
  check('delayed.reserve_after.same_id', job !== null && job.id === id2, true);
  check('delayed.reserve_after.waited', waited >= 0.8, true);

  // release with a delay
  t0 = now();
  await call('release', id2, 50, 1);
  sj = await one('stats_job', id2);
  check('release.stats_job.state', sj.state, 'delayed');
  check('release.stats_job.pri', sj.pri, 50);
  check('release.stats_job.releases', sj.releases, 1);
  check('release.reserve_before.timed_out', (await reserveWithTimeout(0)) === null, true);
  job = await reserveWithTimeout(5);
  waited = now() - t0;
  check('release.reserve_after.same_id', job !== null && job.id === id2, true);
  check('release.reserve_after.waited', waited >= 0.8, true);

  // bury / kick / kick-job
  await call('bury', id2, 60);
  sj = await one('stats_job', id2);
  check('bury.stats_job.state', sj.state, 'buried');
  check('bury.stats_job.pri', sj.pri, 60);
  check('bury.stats_job.buries', sj.buries, 1);
  check('bury.stats_tube.current_jobs_buried',
    (await one('stats_tube', ta))['current-jobs-buried'], 1);
  found = await peek('peek_buried');
  check('bury.peek_buried.same_id', found !== null && found.id === id2, true);
  check('bury.reserve.timed_out', (await reserveWithTimeout(0)) === null, true);
  check('kick.count', await one('kick', 10), 1);
  sj = await one('stats_job', id2);
  check('kick.stats_job.state', sj.state, 'ready');
  check('kick.stats_job.kicks', sj.kicks, 1);
  job = await reserveWithTimeout(5);
  check('kick.reserve.same_id', job !== null && job.id === id2, true);
  await call('bury', id2, 60);
  await call('kick_job', id2);
  sj = await one('stats_job', id2);
  check('kick_job.stats_job.state', sj.state, 'ready');
  check('kick_job.stats_job.kicks', sj.kicks, 2);
  await call('destroy', id2);

  // touch: a touched job outlives its first TTR
  const id3 = await one('put', 100, 0, 3, 'touch-me');
  job = await reserveWithTimeout(5);
  check('touch.reserve.same_id', job !== null && job.id === id3, true);
  await sleep(1500);
  check('touch.before.time_left', (await one('stats_job', id3))['time-left'], 1);
  await call('touch', id3);
  sj = await one('stats_job', id3);
  check('touch.after.time_left', sj['time-left'], 2);
  check('touch.after.state', sj.state, 'reserved');
  await sleep(2000);
  check('touch.after_first_ttr.state', (await one('stats_job', id3)).state, 'reserved');
  await call('destroy', id3);

  // use / watch / ignore across two tubes (on different shards with 4 shards)
  await call('use', tb);
  check('tubes.used', await one('list_tube_used'), tb);
  const idB = await one('put', 10, 0, 30, 'in-b');
  await call('use', ta);
  const idA = await one('put', 20, 0, 30, 'in-a');
  check('tubes.stats_job.tube', (await one('stats_job', idB)).tube, tb);
  await call('watch', tb);
  check('tubes.watched', await one('list_tubes_watched'), [ta, tb]);
  job = await reserveWithTimeout(5);
  check('tubes.reserve_priority.same_id', job !== null && job.id === idB, true);
  await call('destroy', idB);
  await call('ignore', tb);
  check('tubes.ignore.watched', await one('list_tubes_watched'), [ta]);
  check('tubes.ignore_last.not_ignored', (await errorOf('ignore', ta)) === 'NOT_IGNORED', true);
  job = await reserveWithTimeout(5);
  check('tubes.reserve.same_id', job !== null && job.id === idA, true);
  await call('destroy', idA);
  st = await one('stats_tube', ta);
  check('tubes.stats_tube.current_watching', st['current-watching'], 1);
  check('tubes.stats_tube.current_using', st['current-using'], 1);
  check('tubes.gc.not_found', (await errorOf('stats_tube', tb)) === 'NOT_FOUND', true);

  // peek on an empty tube
  check('peek.empty.ready', (await peek('peek_ready')) === null, true);
  check('peek.empty.delayed', (await peek('peek_delayed')) === null, true);
  check('peek.empty.buried', (await peek('peek_buried')) === null, true);

  // server stats and list-tubes
  const stats = await one('stats');
  check('stats.total_jobs', stats['total-jobs'], 5);
  check('stats.current_jobs_ready', stats['current-jobs-ready'], 0);
  check('list_tubes.has_a', (await one('list_tubes')).includes(ta), true);

  client.end();
  process.stdout.write(`${JSON.stringify({ client: 'fivebeans', version, checks })}\n`);
}

main().catch((err) => fail(`unexpected error: ${err && err.stack ? err.stack : err}`));
