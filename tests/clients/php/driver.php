<?php
// The client matrix's PHP driver: the common beanstalk flows through pheanstalk 4 (Debian's
// php-pda-pheanstalk), unmodified. Usage: php driver.php HOST PORT PREFIX
//
// Every check is recorded as key => what the client returned; the first mismatch exits 1 with
// a message on stderr. On success the last line on stdout is the JSON
// {"client": ..., "checks": {...}} that tests/clients/test_clients.py compares with the same
// expectations for every client. The scenario is the one of tests/clients/README.md.

declare(strict_types=1);

require_once 'Pheanstalk/autoload.php';

use Pheanstalk\Exception\ServerException;
use Pheanstalk\Job;
use Pheanstalk\Pheanstalk;

const BODY = "hello\r\nworld";

$checks = [];

function fail(string $message): void
{
    global $checks;
    fwrite(STDERR, "pheanstalk driver: MISMATCH: $message\nchecks so far: " . json_encode($checks) . "\n");
    exit(1);
}

function norm($value): string
{
    if (is_bool($value)) {
        return $value ? 'true' : 'false';
    }
    if ($value === null) {
        return 'null';
    }
    if (is_array($value)) {
        return json_encode(array_map('norm', $value));
    }
    return (string) $value;
}

/** Record what the client returned for $key; exit 1 if it is not $expected. */
function check(string $key, $actual, $expected): void
{
    global $checks;
    $checks[$key] = $actual;
    if (norm($actual) !== norm($expected)) {
        fail("$key: got " . json_encode($actual) . ', expected ' . json_encode($expected));
    }
}

/** True when $fn throws the client's NOT_FOUND server exception. */
function notFound(callable $fn): bool
{
    try {
        $fn();
    } catch (ServerException $e) {
        if (strpos($e->getMessage(), 'NOT_FOUND') !== false) {
            return true;
        }
        fail('expected NOT_FOUND, got ' . get_class($e) . ': ' . $e->getMessage());
    }
    return false;
}

if ($argc !== 4) {
    fwrite(STDERR, "usage: php driver.php HOST PORT PREFIX\n");
    exit(2);
}
[, $host, $port, $prefix] = $argv;
$ta = $prefix . 'a';
$tb = $prefix . 'b';

$c = Pheanstalk::create($host, (int) $port, 5);

// put / reserve / delete
$c->useTube($ta);
check('use.used', $c->listTubeUsed(true), $ta);
$put = $c->put(BODY, 100, 0, 30);
$id1 = $put->getId();
$sj = $c->statsJob($put);
check('put.stats_job.tube', $sj['tube'], $ta);
check('put.stats_job.state', $sj['state'], 'ready');
check('put.stats_job.pri', $sj['pri'], 100);
check('put.stats_job.ttr', $sj['ttr'], 30);
$st = $c->statsTube($ta);
check('put.stats_tube.name', $st['name'], $ta);
check('put.stats_tube.current_jobs_ready', $st['current-jobs-ready'], 1);
check('put.stats_tube.current_jobs_urgent', $st['current-jobs-urgent'], 1);
check('put.stats_tube.total_jobs', $st['total-jobs'], 1);
$peek = $c->peekReady();
check('put.peek_ready.same_id', $peek !== null && $peek->getId() === $id1, true);
check('put.peek_ready.body', $peek->getData(), BODY);
check('put.peek_id.body', $c->peek($put)->getData(), BODY);
$c->watch($ta);
$c->ignore('default');
check('watch.watched', $c->listTubesWatched(true), [$ta]);
$job = $c->reserve();
check('reserve.same_id', $job->getId() === $id1, true);
check('reserve.body', $job->getData(), BODY);
$sj = $c->statsJob($job);
check('reserve.stats_job.state', $sj['state'], 'reserved');
check('reserve.stats_job.reserves', $sj['reserves'], 1);
check('reserve.stats_tube.current_jobs_reserved', $c->statsTube($ta)['current-jobs-reserved'], 1);
$c->delete($job);
check('delete.stats_job.not_found', notFound(fn () => $c->statsJob($job)), true);
check('delete.stats_tube.current_jobs_ready', $c->statsTube($ta)['current-jobs-ready'], 0);

// reserve with timeout: the timeout answer
$t0 = microtime(true);
$none = $c->reserveWithTimeout(1);
$waited = microtime(true) - $t0;
check('timeout.timed_out', $none === null, true);
check('timeout.waited', $waited >= 0.9 && $waited < 5, true);

// delayed put: not reservable before its delay, reservable after
$t0 = microtime(true);
$put = $c->put('later', 200, 1, 30);
$id2 = $put->getId();
$sj = $c->statsJob($put);
check('delayed.stats_job.state', $sj['state'], 'delayed');
check('delayed.stats_job.delay', $sj['delay'], 1);
check('delayed.stats_tube.current_jobs_delayed', $c->statsTube($ta)['current-jobs-delayed'], 1);
$peek = $c->peekDelayed();
check('delayed.peek_delayed.same_id', $peek !== null && $peek->getId() === $id2, true);
check('delayed.peek_ready.none', $c->peekReady() === null, true);
check('delayed.reserve_before.timed_out', $c->reserveWithTimeout(0) === null, true);
$job = $c->reserveWithTimeout(5);
$waited = microtime(true) - $t0;
check('delayed.reserve_after.same_id', $job !== null && $job->getId() === $id2, true);
check('delayed.reserve_after.waited', $waited >= 0.8, true);

// release with a delay
$t0 = microtime(true);
$c->release($job, 50, 1);
$sj = $c->statsJob($job);
check('release.stats_job.state', $sj['state'], 'delayed');
check('release.stats_job.pri', $sj['pri'], 50);
check('release.stats_job.releases', $sj['releases'], 1);
check('release.reserve_before.timed_out', $c->reserveWithTimeout(0) === null, true);
$job = $c->reserveWithTimeout(5);
$waited = microtime(true) - $t0;
check('release.reserve_after.same_id', $job !== null && $job->getId() === $id2, true);
check('release.reserve_after.waited', $waited >= 0.8, true);

// bury / kick / kick-job
$c->bury($job, 60);
$sj = $c->statsJob($job);
check('bury.stats_job.state', $sj['state'], 'buried');
check('bury.stats_job.pri', $sj['pri'], 60);
check('bury.stats_job.buries', $sj['buries'], 1);
check('bury.stats_tube.current_jobs_buried', $c->statsTube($ta)['current-jobs-buried'], 1);
$peek = $c->peekBuried();
check('bury.peek_buried.same_id', $peek !== null && $peek->getId() === $id2, true);
check('bury.reserve.timed_out', $c->reserveWithTimeout(0) === null, true);
check('kick.count', $c->kick(10), 1);
$sj = $c->statsJob($job);
check('kick.stats_job.state', $sj['state'], 'ready');
check('kick.stats_job.kicks', $sj['kicks'], 1);
$job = $c->reserveWithTimeout(5);
check('kick.reserve.same_id', $job !== null && $job->getId() === $id2, true);
$c->bury($job, 60);
$c->kickJob($job);
$sj = $c->statsJob($job);
check('kick_job.stats_job.state', $sj['state'], 'ready');
check('kick_job.stats_job.kicks', $sj['kicks'], 2);
$c->delete($job);

// touch: a touched job outlives its first TTR
$put = $c->put('touch-me', 100, 0, 3);
$job = $c->reserveWithTimeout(5);
check('touch.reserve.same_id', $job !== null && $job->getId() === $put->getId(), true);
usleep(1500000);
check('touch.before.time_left', $c->statsJob($job)['time-left'], 1);
$c->touch($job);
$sj = $c->statsJob($job);
check('touch.after.time_left', $sj['time-left'], 2);
check('touch.after.state', $sj['state'], 'reserved');
usleep(2000000);
check('touch.after_first_ttr.state', $c->statsJob($job)['state'], 'reserved');
$c->delete($job);

// use / watch / ignore across two tubes (on different shards with 4 shards)
$c->useTube($tb);
check('tubes.used', $c->listTubeUsed(true), $tb);
$put_b = $c->put('in-b', 10, 0, 30);
$c->useTube($ta);
$put_a = $c->put('in-a', 20, 0, 30);
check('tubes.stats_job.tube', $c->statsJob($put_b)['tube'], $tb);
$c->watch($tb);
check('tubes.watched', $c->listTubesWatched(true), [$ta, $tb]);
$job = $c->reserveWithTimeout(5);
check('tubes.reserve_priority.same_id', $job !== null && $job->getId() === $put_b->getId(), true);
$c->delete($job);
$c->ignore($tb);
check('tubes.ignore.watched', $c->listTubesWatched(true), [$ta]);
$notIgnored = false;
try {
    $c->ignore($ta);
} catch (ServerException $e) {
    $notIgnored = strpos($e->getMessage(), 'NOT_IGNORED') !== false;
}
check('tubes.ignore_last.not_ignored', $notIgnored, true);
$job = $c->reserveWithTimeout(5);
check('tubes.reserve.same_id', $job !== null && $job->getId() === $put_a->getId(), true);
$c->delete($job);
$st = $c->statsTube($ta);
check('tubes.stats_tube.current_watching', $st['current-watching'], 1);
check('tubes.stats_tube.current_using', $st['current-using'], 1);
check('tubes.gc.not_found', notFound(fn () => $c->statsTube($tb)), true);

// peek on an empty tube
check('peek.empty.ready', $c->peekReady() === null, true);
check('peek.empty.delayed', $c->peekDelayed() === null, true);
check('peek.empty.buried', $c->peekBuried() === null, true);

// server stats and list-tubes
$s = $c->stats();
check('stats.total_jobs', $s['total-jobs'], 5);
check('stats.current_jobs_ready', $s['current-jobs-ready'], 0);
check('list_tubes.has_a', in_array($ta, $c->listTubes(), true), true);

echo json_encode(['client' => 'pheanstalk', 'checks' => $checks]), "\n";
