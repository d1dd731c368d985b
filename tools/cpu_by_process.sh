#!/usr/bin/env bash
# cpu_by_process.sh "SERVE FLAGS" "BLOAD FLAGS": start `shardq serve -p 0 SERVE FLAGS` from this
# checkout, run the C load generator against it (BLOAD=/path/to/bload; -W 1 -d $DUR, default
# 5 s) and print ops/s, the server's CPU in cores and in µs per operation, in all and per
# process (utime+stime from /proc/<pid>/stat over the measured seconds). The server is
# stopped by its pid when the load ends. Used for docs/BENCHMARKS.md ("Several serving
# processes": the scaling table and the per-command costs).
set -u
FLAGS=$1; BL=$2; DUR=${DUR:-5}
BLOAD=${BLOAD:?set BLOAD to the bload binary}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cd "$ROOT"
# shellcheck disable=SC2086
"$PY" -m shardq serve -p 0 $FLAGS > "$OUT/server.log" 2>&1 &
S=$!
for _ in $(seq 100); do grep -q listening "$OUT/server.log" && break; sleep 0.1; done
PORT=$(grep -o "listening on 127.0.0.1:[0-9]*" "$OUT/server.log" | cut -d: -f2)
[ -n "$PORT" ] || { cat "$OUT/server.log" >&2; kill "$S"; exit 1; }
snap() {
	for c in $S $(pgrep -P "$S"); do
		role=$(tr '\0' ' ' < "/proc/$c/cmdline" | sed -E 's/^shardq: ([a-z]+( [0-9]+)?).*/\1/')
		echo "$role|$(awk '{print $14+$15}' "/proc/$c/stat")"
	done
}
# shellcheck disable=SC2086
"$BLOAD" -p "$PORT" $BL -W 1 -d "$DUR" > "$OUT/bload.txt" 2>&1 &
B=$!
sleep 1; snap > "$OUT/r0"; t0=$(date +%s.%N)
wait $B
snap > "$OUT/r1"; t1=$(date +%s.%N)
kill "$S"; wait "$S" 2>/dev/null
ops=$(awk '$1 == "all" {print $3}' "$OUT/bload.txt")
[ -n "$ops" ] || ops=$(awk '$1 == "put" || $1 == "reserve" {print $3; exit}' "$OUT/bload.txt")
"$PY" - "$FLAGS" "$BL" "$ops" "$t0" "$t1" "$OUT/r0" "$OUT/r1" <<'PY'
import sys

flags, bl, ops, t0, t1, r0, r1 = sys.argv[1:8]
rate, wall = float(ops), float(t1) - float(t0)


def load(path: str) -> dict[str, int]:
    return {k: int(v) for k, v in (line.rstrip("\n").rsplit("|", 1) for line in open(path))}


before, after = load(r0), load(r1)
parts, total = [], 0.0
for role, ticks in after.items():
    cores = (ticks - before.get(role, ticks)) / 100 / wall
    total += cores
    if cores > 0.005:
        parts.append(f"{role.strip()} {cores:.2f} ({cores * 1e6 / rate:.1f} µs/op)")
line = f"{flags:34s} {bl:32s} {rate:9.0f} ops/s  server {total:.2f} cores"
sys.stdout.write(f"{line} {total * 1e6 / rate:5.1f} µs/op | {', '.join(parts)}\n")
PY
