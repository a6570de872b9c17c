#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz / libFuzzer) of the input surfaces; docs/reliability.md.
#
#   scripts/fuzz.sh TARGET [SECONDS]   fuzz one target (default 600 s), then merge what it
#                                      found into fuzz/corpus/TARGET, minimised (cargo fuzz cmin)
#   scripts/fuzz.sh --all [SECONDS]    every target in turn
#   scripts/fuzz.sh --list             the targets
#
# Targets (harnesses in src/fuzzing.rs): frame, config, bag, cdr, image_file.
# Needs the nightly toolchain (libFuzzer's sanitizer flags; installed with rustup on first
# use); installs cargo-fuzz with
# `cargo install` on first use (cached in ~/.cargo/bin). Runs under `nice -n 19` with
# -timeout=10 -rss_limit_mb=2048; a crash, hang or OOM stops the run and leaves the input in
# fuzz/artifacts/TARGET/ (reproduce: cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/FILE).
# FUZZ_JOBS=N runs N libFuzzer workers (default 1). Extra libFuzzer flags: FUZZ_ARGS="...".
# FUZZ_NO_BUILD=1 runs the target binary already in fuzz/target as it is (no rebuild: for a
# checkout that others keep editing while a long series of runs goes on).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
TARGETS=(frame config bag cdr image_file)

die() { echo "fuzz.sh: $*" >&2; exit 2; }

case "${1:-}" in
  --list) printf '%s\n' "${TARGETS[@]}"; exit 0 ;;
  --all)
    for t in "${TARGETS[@]}"; do "$0" "$t" "${2:-600}"; done
    exit 0 ;;
  ""|-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
esac
TARGET=$1
SECONDS_TO_RUN=${2:-600}
[[ " ${TARGETS[*]} " == *" $TARGET "* ]] || die "unknown target $TARGET (--list)"

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing the nightly toolchain (once; cargo-fuzz needs it)"
  rustup toolchain install nightly --profile minimal || die "could not install the nightly toolchain"
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz (once; cached in ~/.cargo/bin)"
  cargo install cargo-fuzz --locked
fi

CORPUS=fuzz/corpus/$TARGET
if [ -z "$(ls -A "$CORPUS" 2>/dev/null)" ]; then
  echo "fuzz.sh: seeding $CORPUS"
  cargo test --test fuzz_corpus -- --ignored write_seed_corpus
fi
# Largest input per target: the seed bags are sqlite3 files of a few pages.
case "$TARGET" in
  bag) MAX_LEN=65536 ;;
  image_file | cdr) MAX_LEN=16384 ;;
  *) MAX_LEN=8192 ;;
esac
# New inputs go to a scratch directory first, so the committed corpus only grows by the
# minimising merge below. The merge keeps a smallest set of inputs that covers every edge
# (-use_counters=0: hit-count buckets would keep several times more inputs for little).
WORK=fuzz/target/new-corpus/$TARGET
mkdir -p "$WORK"
LIBFUZZER_ARGS=(-max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048
  -max_len="$MAX_LEN" -print_final_stats=1 -artifact_prefix="$ROOT/fuzz/artifacts/$TARGET/")
mkdir -p "fuzz/artifacts/$TARGET"
echo "fuzz.sh: $TARGET for ${SECONDS_TO_RUN} s"
BIN=fuzz/target/x86_64-unknown-linux-gnu/release/$TARGET
# As cargo-fuzz sets it: the bundled SQLite amalgamation defines same-named static tables,
# which ASan's one-definition-rule check reports at start-up.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0}
if [ "${FUZZ_NO_BUILD:-0}" = 1 ]; then
  [ -x "$BIN" ] || die "FUZZ_NO_BUILD=1 but $BIN is not built (cargo +nightly fuzz build)"
  [ "${FUZZ_JOBS:-1}" -gt 1 ] && LIBFUZZER_ARGS+=(-fork="$FUZZ_JOBS")
  nice -n 19 "$BIN" "$WORK" "$CORPUS" "${LIBFUZZER_ARGS[@]}" ${FUZZ_ARGS:-}
else
  (cd fuzz && nice -n 19 cargo +nightly fuzz run "$TARGET" "../$WORK" "../$CORPUS" \
    -j "${FUZZ_JOBS:-1}" -- "${LIBFUZZER_ARGS[@]}" ${FUZZ_ARGS:-})
fi
cp -n "$WORK"/* "$CORPUS"/ 2>/dev/null || true
rm -rf "$WORK"
# The minimising merge renames every input to its hash: keep the named seeds and
# regression inputs (tests/robustness.rs includes some) under their names.
KEEP=fuzz/target/keep/$TARGET
rm -rf "$KEEP" && mkdir -p "$KEEP"
cp "$CORPUS"/seed-* "$CORPUS"/regression-* "$KEEP"/ 2>/dev/null || true
if [ "${FUZZ_NO_BUILD:-0}" = 1 ]; then
  # What `cargo fuzz cmin` does: merge into a fresh directory, then replace.
  MIN=fuzz/target/cmin/$TARGET
  rm -rf "$MIN" && mkdir -p "$MIN"
  nice -n 19 "$BIN" -merge=1 -use_counters=0 -rss_limit_mb=2048 -timeout=10 \
    -max_len="$MAX_LEN" "$MIN" "$CORPUS"
  rm -rf "$CORPUS" && mv "$MIN" "$CORPUS"
else
  (cd fuzz && nice -n 19 cargo +nightly fuzz cmin "$TARGET" "../$CORPUS" -- \
    -use_counters=0 -rss_limit_mb=2048 -timeout=10 -max_len="$MAX_LEN")
fi
cp "$KEEP"/* "$CORPUS"/ 2>/dev/null || true
echo "fuzz.sh: $CORPUS now holds $(ls "$CORPUS" | wc -l) inputs, $(du -sh "$CORPUS" | cut -f1)"
