#!/usr/bin/env bash
# A profile-guided release build of tidecache-server, the build docs/BENCHMARKS.md measures.
#
#   scripts/pgo-build.sh            # → target/pgo/tidecache-server
#
# Why: the per-request path crosses the decoder, dispatch, the store and the reply encoder,
# spread over many functions in several crates. Laid out by a profile, the hot code is packed
# together and the cold paths moved aside: callgrind, GET at pipeline 16, 6,106 → 4,875
# instructions and 26.4 → 1.2 instruction-cache misses per request (redis-server 7.0.15: 6.2).
#
# Steps: an instrumented build (with the release profile's LTO and single codegen unit: a
# profile names each crate-local function after its codegen unit, so a build split otherwise
# would not find those functions' counts), a training run of the compare harness's quick throughput part against it (the commands a web tier
# sends: strings, hashes, lists, sets, sorted sets, streams, scripts, DOC.* at pipeline 1 and
# 16; redis-server and redis-benchmark must be installed), then the release build (fat LTO,
# Cargo.toml) with the merged profile. Both builds are made from the same tree, so the profile
# always matches the code. Needs llvm-profdata: `rustup component add llvm-tools` (done here
# when missing). A plain `cargo build --release` is the same program without the layout.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/pgo
profdata_tool() {
  find "$(rustc --print sysroot)" -name llvm-profdata -type f 2>/dev/null | head -1
}
tool=$(profdata_tool)
if [ -z "$tool" ]; then
  rustup component add llvm-tools >/dev/null
  tool=$(profdata_tool)
fi
[ -n "$tool" ] || { echo "llvm-profdata not found (rustup component add llvm-tools)" >&2; exit 1; }

# RUSTFLAGS replaces .cargo/config.toml's list, so its flags are repeated here.
base="--cfg tokio_unstable --check-cfg cfg(tokio_unstable)"
rm -rf "$out"
mkdir -p "$out/raw" "$out/build-scripts"

# RUSTFLAGS reach the build scripts too: their counts go to a directory of their own, the
# server's (LLVM_PROFILE_FILE below) to raw/.
echo "pgo: instrumented build" >&2
RUSTFLAGS="$base -Cprofile-generate=$out/build-scripts" \
  cargo build --release --bin tidecache-server --target-dir "$target/pgo-gen"

echo "pgo: training run" >&2
LLVM_PROFILE_FILE="$out/raw/%p-%m.profraw" python3 benches/compare/run.py --quick --no-build \
  --only throughput --tidecache "$target/pgo-gen/release/tidecache-server" >"$out/training.log"
ls "$out"/raw/*.profraw >/dev/null 2>&1 || { echo "pgo: the training run wrote no profile" >&2; exit 1; }
"$tool" merge -o "$out/merged.profdata" "$out"/raw/*.profraw

echo "pgo: release build with the profile" >&2
RUSTFLAGS="$base -Cprofile-use=$out/merged.profdata" \
  cargo build --release --bin tidecache-server --target-dir "$target/pgo-use"
cp "$target/pgo-use/release/tidecache-server" "$out/tidecache-server"
echo "$out/tidecache-server"
