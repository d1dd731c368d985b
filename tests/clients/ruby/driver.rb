# frozen_string_literal: true

# The client matrix's Ruby driver: the common beanstalk flows through beaneater (Debian's
# ruby-beaneater), unmodified. Usage: ruby driver.rb HOST PORT PREFIX
#
# Every check is recorded as key => what the client returned; the first mismatch exits 1 with
# a message on stderr. On success the last line on stdout is the JSON
# {"client": ..., "checks": {...}} that tests/clients/test_clients.py compares with the same
# expectations for every client. The scenario is the one of tests/clients/README.md.

require 'beaneater'
require 'json'

BODY = "hello\r\nworld"

$checks = {}

def fail!(message)
  warn "beaneater driver: MISMATCH: #{message}\nchecks so far: #{JSON.generate($checks)}"
  exit 1
end

def norm(value)
  case value
  when nil then 'null'
  when Array then JSON.generate(value.map { |v| norm(v) })
  else value.to_s
  end
end

# Record what the client returned for key; exit 1 if it is not expected.
def check(key, actual, expected)
  $checks[key] = actual
  return if norm(actual) == norm(expected)

  fail!("#{key}: got #{actual.inspect}, expected #{expected.inspect}")
end

def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# True when the block raises the client's error for the given status (TIMED_OUT, NOT_FOUND...).
def raises?(error_class)
  yield
  false
rescue error_class
  true
end

# The client's reserve-with-timeout; nil for its timeout answer (Beaneater::TimedOutError).
def reserve_with_timeout(client, seconds)
  client.tubes.reserve(seconds)
rescue Beaneater::TimedOutError
  nil
end

unless ARGV.length == 3
  warn 'usage: ruby driver.rb HOST PORT PREFIX'
  exit 2
end
host, port, prefix = ARGV
ta = "#{prefix}a"
tb = "#{prefix}b"

c = Beaneater.new("#{host}:#{port}")
tube_a = c.tubes[ta]
tube_b = c.tubes[tb]

# put / reserve / delete
c.tubes.use(ta)
check('use.used', c.tubes.used.name, ta)
id1 = tube_a.put(BODY, pri: 100, delay: 0, ttr: 30)[:id]
put = c.jobs.find(id1)
sj = put.stats
check('put.stats_job.tube', sj.tube, ta)
check('put.stats_job.state', sj.state, 'ready')
check('put.stats_job.pri', sj.pri, 100)
check('put.stats_job.ttr', sj.ttr, 30)
st = tube_a.stats
check('put.stats_tube.name', st.name, ta)
check('put.stats_tube.current_jobs_ready', st.current_jobs_ready, 1)
check('put.stats_tube.current_jobs_urgent', st.current_jobs_urgent, 1)
check('put.stats_tube.total_jobs', st.total_jobs, 1)
peek = tube_a.peek(:ready)
check('put.peek_ready.same_id', !peek.nil? && peek.id == id1, true)
check('put.peek_ready.body', peek.body, BODY)
check('put.peek_id.body', put.body, BODY)
c.tubes.watch(ta)
c.tubes.ignore('default')
check('watch.watched', c.tubes.watched.map(&:name), [ta])
job = c.tubes.reserve
check('reserve.same_id', job.id == id1, true)
check('reserve.body', job.body, BODY)
sj = job.stats
check('reserve.stats_job.state', sj.state, 'reserved')
check('reserve.stats_job.reserves', sj.reserves, 1)
check('reserve.stats_tube.current_jobs_reserved', tube_a.stats.current_jobs_reserved, 1)
job.delete
check('delete.stats_job.not_found', raises?(Beaneater::NotFoundError) { job.stats }, true)
check('delete.stats_tube.current_jobs_ready', tube_a.stats.current_jobs_ready, 0)

# reserve with timeout: the timeout answer
t0 = now
none = reserve_with_timeout(c, 1)
waited = now - t0
check('timeout.timed_out', none.nil?, true)
check('timeout.waited', waited >= 0.9 && waited < 5, true)

# delayed put: not reservable before its delay, reservable after
t0 = now
id2 = tube_a.put('later', pri: 200, delay: 1, ttr: 30)[:id]
put = c.jobs.find(id2)
sj = put.stats
check('delayed.stats_job.state', sj.state, 'delayed')
check('delayed.stats_job.delay', sj.delay, 1)
check('delayed.stats_tube.current_jobs_delayed', tube_a.stats.current_jobs_delayed, 1)
peek = tube_a.peek(:delayed)
check('delayed.peek_delayed.same_id', !peek.nil? && peek.id == id2, true)
check('delayed.peek_ready.none', tube_a.peek(:ready).nil?, true)
check('delayed.reserve_before.timed_out', reserve_with_timeout(c, 0).nil?, true)
job = reserve_with_timeout(c, 5)
waited = now - t0
check('delayed.reserve_after.same_id', !job.nil? && job.id == id2, true)
check('delayed.reserve_after.waited', waited >= 0.8, true)

# release with a delay
t0 = now
job.release(pri: 50, delay: 1)
sj = job.stats
check('release.stats_job.state', sj.state, 'delayed')
check('release.stats_job.pri', sj.pri, 50)
check('release.stats_job.releases', sj.releases, 1)
check('release.reserve_before.timed_out', reserve_with_timeout(c, 0).nil?, true)
job = reserve_with_timeout(c, 5)
waited = now - t0
check('release.reserve_after.same_id', !job.nil? && job.id == id2, true)
check('release.reserve_after.waited', waited >= 0.8, true)

# bury / kick / kick-job
job.bury(pri: 60)
sj = job.stats
check('bury.stats_job.state', sj.state, 'buried')
check('bury.stats_job.pri', sj.pri, 60)
check('bury.stats_job.buries', sj.buries, 1)
check('bury.stats_tube.current_jobs_buried', tube_a.stats.current_jobs_buried, 1)
peek = tube_a.peek(:buried)
check('bury.peek_buried.same_id', !peek.nil? && peek.id == id2, true)
check('bury.reserve.timed_out', reserve_with_timeout(c, 0).nil?, true)
check('kick.count', tube_a.kick(10)[:id], 1)
sj = job.stats
check('kick.stats_job.state', sj.state, 'ready')
check('kick.stats_job.kicks', sj.kicks, 1)
job = reserve_with_timeout(c, 5)
check('kick.reserve.same_id', !job.nil? && job.id == id2, true)
job.bury(pri: 60)
job.kick
sj = job.stats
check('kick_job.stats_job.state', sj.state, 'ready')
check('kick_job.stats_job.kicks', sj.kicks, 2)
job.delete

# touch: a touched job outlives its first TTR
id3 = tube_a.put('touch-me', pri: 100, delay: 0, ttr: 3)[:id]
job = reserve_with_timeout(c, 5)
check('touch.reserve.same_id', !job.nil? && job.id == id3, true)
sleep 1.5
check('touch.before.time_left', job.stats.time_left, 1)
job.touch
sj = job.stats
check('touch.after.time_left', sj.time_left, 2)
check('touch.after.state', sj.state, 'reserved')
sleep 2.0
check('touch.after_first_ttr.state', job.stats.state, 'reserved')
job.delete

# use / watch / ignore across two tubes (on different shards with 4 shards)
c.tubes.use(tb)
check('tubes.used', c.tubes.used.name, tb)
id_b = tube_b.put('in-b', pri: 10, delay: 0, ttr: 30)[:id]
id_a = tube_a.put('in-a', pri: 20, delay: 0, ttr: 30)[:id]
check('tubes.stats_job.tube', c.jobs.find(id_b).stats.tube, tb)
c.tubes.watch(tb)
check('tubes.watched', c.tubes.watched.map(&:name), [ta, tb])
job = reserve_with_timeout(c, 5)
check('tubes.reserve_priority.same_id', !job.nil? && job.id == id_b, true)
job.delete
c.tubes.ignore(tb)
check('tubes.ignore.watched', c.tubes.watched.map(&:name), [ta])
check('tubes.ignore_last.not_ignored', raises?(Beaneater::NotIgnoredError) { c.tubes.ignore(ta) }, true)
job = reserve_with_timeout(c, 5)
check('tubes.reserve.same_id', !job.nil? && job.id == id_a, true)
job.delete
st = tube_a.stats
check('tubes.stats_tube.current_watching', st.current_watching, 1)
check('tubes.stats_tube.current_using', st.current_using, 1)
check('tubes.gc.not_found', raises?(Beaneater::NotFoundError) { tube_b.stats }, true)

# peek on an empty tube
check('peek.empty.ready', tube_a.peek(:ready).nil?, true)
check('peek.empty.delayed', tube_a.peek(:delayed).nil?, true)
check('peek.empty.buried', tube_a.peek(:buried).nil?, true)

# server stats and list-tubes
check('stats.total_jobs', c.stats.total_jobs, 5)
check('stats.current_jobs_ready', c.stats.current_jobs_ready, 0)
check('list_tubes.has_a', c.tubes.all.map(&:name).include?(ta), true)

c.close
puts JSON.generate({ client: 'beaneater', version: Beaneater::VERSION, checks: $checks })
