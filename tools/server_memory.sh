#!/usr/bin/env bash
# server_memory.sh shardq|beanstalkd [N] ["SERVE FLAGS"]: the memory a whole server takes for
# N jobs of 100 bytes (default 1,000,000). Starts a fresh server on a free 127.0.0.1 port
# (`shardq serve` from this checkout with SERVE FLAGS, or `beanstalkd`), sums VmRSS over its
# process tree (/proc/<pid>/status) once it is idle (the sum has stopped moving: every child
# is up), puts N jobs with the C load generator (BLOAD=/path/to/bload: `-w put -c 10 -P 16
# -s 100 -n N`), sums it again once the puts are done, and prints both and the bytes per
# job; and the same with PSS (/proc/<pid>/smaps_rollup), which counts the pages forked
# processes share once. The server is stopped by its pid.
# Used for docs/BENCHMARKS.md ("Memory: 1,000,000 jobs of 100 bytes").
set -u
KIND=$1; N=${2:-1000000}; FLAGS=${3:-}
BLOAD=${BLOAD:?set BLOAD to the bload binary}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cd "$ROOT"
export PYTHONPATH=$ROOT  # this checkout's shardq, whatever the venv has installed
PORT=$("$BLOAD" --free-port)
if [ "$KIND" = beanstalkd ]; then
	beanstalkd -l 127.0.0.1 -p "$PORT" > "$OUT/server.log" 2>&1 &
else
	# shellcheck disable=SC2086
	"$PY" -m shardq serve -l 127.0.0.1 -p "$PORT" $FLAGS > "$OUT/server.log" 2>&1 &
fi
S=$!
"$BLOAD" -p "$PORT" --wait 30 || { cat "$OUT/server.log" >&2; kill "$S"; exit 1; }
tree() {  # the pid and all its descendants
	echo "$1"
	for c in $(pgrep -P "$1"); do tree "$c"; done
}
sum_kib() {  # sum_kib FILE FIELD: the field summed over the tree
	for p in $(tree "$S"); do awk -v f="$2:" '$1 == f {print $2}' "/proc/$p/$1"; done |
		awk '{s += $1} END {print s}'
}
last=0; idle=$(sum_kib status VmRSS)
for _ in $(seq 30); do  # until the sum has stopped moving: every child is up and idle
	[ "$idle" = "$last" ] && break
	sleep 1; last=$idle; idle=$(sum_kib status VmRSS)
done
idle_pss=$(sum_kib smaps_rollup Pss)
"$BLOAD" -p "$PORT" -w put -c 10 -P 16 -s 100 -n "$N" -d 3600 > "$OUT/bload.txt" 2>&1
sleep 2  # the last turn's replies are out, the engine idle again
full=$(sum_kib status VmRSS); full_pss=$(sum_kib smaps_rollup Pss)
kill "$S"; wait "$S" 2>/dev/null
grep -q "put" "$OUT/bload.txt" || { cat "$OUT/bload.txt" >&2; exit 1; }
awk -v kind="$KIND $FLAGS" -v n="$N" -v i="$idle" -v f="$full" -v ip="$idle_pss" \
	-v fp="$full_pss" 'BEGIN {
	printf "%s: RSS idle %.1f MiB, with %d jobs %.1f MiB, %.0f bytes a job", kind, i / 1024,
		n, f / 1024, (f - i) * 1024 / n
	printf "; PSS %.1f MiB, %.1f MiB, %.0f bytes a job\n", ip / 1024, fp / 1024,
		(fp - ip) * 1024 / n }'
