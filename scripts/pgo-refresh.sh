#!/usr/bin/env bash
# Refreshes the profile that `cargo build --release` lays the server out by
# (pgo/tidecache.profdata, read by scripts/rustc-pgo, the rustc wrapper .cargo/config.toml
# names).
#
#   scripts/pgo-refresh.sh          # → pgo/tidecache.profdata, pgo/llvm-major, pgo/trained-on
#
# Why a profile: the per-request path crosses the decoder, dispatch, the store and the reply
# encoder, spread over many functions in several crates. Laid out by a profile, the hot code is
# packed together and the cold paths moved aside (callgrind, GET at pipeline 16: 6,106 →
# 4,875 instructions and 26.4 → 1.2 instruction-cache misses per request; redis-server
# 7.0.15: 6.2).
#
# When: after a change to a hot path. A function whose code changed since the training run
# gets no profile (LLVM matches each function by a hash of its control flow), so the build
# stays correct and only its layout ages; pgo/trained-on names the commit trained on.
#
# Steps: an instrumented build (with the release profile's LTO and single codegen unit), a
# training run of the compare harness's quick throughput part against it (the commands a web
# tier sends: strings, hashes, lists, sets, sorted sets, streams, scripts, DOC.* at pipeline 1
# and 16; redis-server and redis-benchmark must be installed), then the merge. Needs
# llvm-profdata: `rustup component add llvm-tools` (done here when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target=${CARGO_TARGET_DIR:-$root/target}
work=$target/pgo-train
profdata_tool() {
  find "$(rustc --print sysroot)" -name llvm-profdata -type f 2>/dev/null | head -1
}
tool=$(profdata_tool)
if [ -z "$tool" ]; then
  rustup component add llvm-tools >/dev/null
  tool=$(profdata_tool)
fi
[ -n "$tool" ] || { echo "llvm-profdata not found (rustup component add llvm-tools)" >&2; exit 1; }

# RUSTFLAGS replaces .cargo/config.toml's list, so its flags are repeated here; the wrapper
# leaves a build with its own profile flags alone.
base="--cfg tokio_unstable --check-cfg cfg(tokio_unstable)"
rm -rf "$work"
mkdir -p "$work/raw" "$work/build-scripts"

# RUSTFLAGS reach the build scripts too: their counts go to a directory of their own, the
# server's (LLVM_PROFILE_FILE below) to raw/.
echo "pgo: instrumented build" >&2
RUSTFLAGS="$base -Cprofile-generate=$work/build-scripts" \
  cargo build --release --bin tidecache-server --target-dir "$target/pgo-gen"

echo "pgo: training run" >&2
LLVM_PROFILE_FILE="$work/raw/%p-%m.profraw" python3 benches/compare/run.py --quick --no-build \
  --only throughput --tidecache "$target/pgo-gen/release/tidecache-server" >"$work/training.log"
ls "$work"/raw/*.profraw >/dev/null 2>&1 || { echo "pgo: the training run wrote no profile" >&2; exit 1; }
"$tool" merge -o "$root/pgo/tidecache.profdata" "$work"/raw/*.profraw
rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p' >"$root/pgo/llvm-major"
git rev-parse HEAD >"$root/pgo/trained-on"
if [ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock)" ]; then
  echo "pgo: note: src/ has uncommitted changes; pgo/trained-on names the commit below them" >&2
fi
echo "pgo: wrote pgo/tidecache.profdata; \`cargo build --release\` now uses it" >&2
