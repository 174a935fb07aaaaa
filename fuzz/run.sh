#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 60) from its committed seeds
# (fuzz/seeds/<target>) plus what earlier runs kept (fuzz/corpus/<target>). Exits non-zero
# when a target crashes, printing the input that crashed it.
#
#   bash fuzz/run.sh [SECONDS]
#   FUZZ_TARGETS="ejson command" bash fuzz/run.sh 30   # some targets only
#   FUZZ_JOBS=2 bash fuzz/run.sh 45                     # two targets at a time
#
# cargo-fuzz passes nightly-only flags (-Z sanitizer, -Z build-std options); the stable
# toolchain accepts them with RUSTC_BOOTSTRAP=1. `-s none`: no AddressSanitizer — the code
# under test is safe Rust (ASan finds memory errors, which safe Rust cannot make, and costs
# a slower build and 2-3x slower runs); panics, overflow checks and debug assertions are on.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
jobs="${FUZZ_JOBS:-1}"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz --version 0.13.2
fi
targets="${FUZZ_TARGETS:-$(cargo fuzz list)}"
cargo fuzz build -O -s none
bin="$CARGO_TARGET_DIR/$(rustc -vV | sed -n 's/^host: //p')/release"

run_one() {
  local t="$1" log="artifacts/$1.log"
  mkdir -p "corpus/$t" "artifacts/$t"
  # -timeout: an input slower than this is reported as a hang; -rss_limit_mb: as an OOM.
  # The binary cargo-fuzz built, run directly: `cargo fuzz run` would first rebuild when a
  # source file changed meanwhile, and that build would eat into the run's time.
  if "$bin/$t" "corpus/$t" "seeds/$t" -artifact_prefix="artifacts/$t/" \
      -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
      >"$log" 2>&1; then
    echo "$t: $(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)"
    grep -E '^stat::number_of_executed_units' "$log" | sed "s/^/$t: /"
    return 0
  fi
  echo "FAIL $t (full log: fuzz/$log)"
  grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|deadly signal' "$log" | head -5 || true
  grep -oE 'Test unit written to .*' "$log" | sed 's/^Test unit written to /  crash input: fuzz\//' || true
  tail -30 "$log"
  return 1
}

status=0
pids=()
for t in $targets; do
  run_one "$t" &
  pids+=("$!")
  if [ "${#pids[@]}" -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do
  wait "$p" || status=1
done
# Nothing a target started may outlive the run: a process still running one of the target
# binaries is a target that re-executed itself (once, the background save's stand-in child
# did, and each copy fuzzed forever and saved in turn, until the machine ran out of time).
# (Matched by executable, not by command line: that child renamed itself.)
bins=""
for t in $targets; do
  bins="$bins $(readlink -f "$bin/$t")"
done
left=()
for p in /proc/[0-9]*; do
  exe="$(readlink "$p/exe" 2>/dev/null || true)"
  for b in $bins; do
    if [ "$exe" = "$b" ]; then
      left+=("${p#/proc/}")
    fi
  done
done
if [ "${#left[@]}" -gt 0 ]; then
  echo "FAIL: ${#left[@]} processes of the fuzz targets outlived the run:" >&2
  ps -o pid,ppid,etime,args -p "$(IFS=,; echo "${left[*]}")" | head -20 >&2 || true
  kill -9 "${left[@]}" 2>/dev/null || true
fi
if [ "$status" -ne 0 ]; then
  echo "fuzzing found a crash: reproduce with" \
    "RUSTC_BOOTSTRAP=1 cargo fuzz run -O -s none <target> <crash input>" >&2
fi
if [ "${#left[@]}" -gt 0 ]; then
  status=1
fi
exit "$status"
