#!/usr/bin/env bash
# Runs the whole suite N times in a row (default 5) while the machine is kept busy, and stops at
# the first red run (issue 9: "passes 5 times in a row under stress-ng-like load on 2 cores").
# The load is stress-ng's CPU workers when stress-ng is installed, else one Python busy loop per
# core; LOAD is the percentage each worker burns (default 50). Logs: $OUT/run<i>.log, $OUT/load.log.
#   scripts/suite-under-load.sh [runs] [pytest args...]
set -u
cd "$(dirname "$0")/.."
runs=${1:-5}; shift || true
out=${OUT:-$(mktemp -d /tmp/loom-under-load.XXXXXX)}
load=${LOAD:-50}
cores=$(nproc)
if command -v stress-ng >/dev/null; then
  stress-ng --cpu "$cores" --cpu-load "$load" --timeout 0 >/dev/null 2>&1 &
else
  python3 -c "
import multiprocessing as mp, time
def burn(share):
    while True:
        end = time.monotonic() + 0.1 * share
        while time.monotonic() < end: pass
        time.sleep(0.1 * (1 - share))
for _ in range($cores): mp.Process(target=burn, args=($load / 100,), daemon=True).start()
time.sleep(10**9)" &
fi
burner=$!
(while true; do echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 30; done) >"$out/load.log" &
sampler=$!
trap 'kill $burner $sampler 2>/dev/null; pkill -P $burner 2>/dev/null' EXIT
for i in $(seq 1 "$runs"); do
  started=$(date +%s)
  ./loom test "$@" >"$out/run$i.log" 2>&1
  rc=$?
  echo "run $i: exit $rc in $(( $(date +%s) - started )) s; $(grep -E '[0-9]+ (passed|failed)' "$out/run$i.log" | tail -1)"
  [ $rc -eq 0 ] || { echo "logs: $out"; exit $rc; }
done
echo "logs: $out"
