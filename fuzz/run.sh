#!/bin/sh
# Coverage-guided fuzzing with libFuzzer on the stable toolchain (no
# cargo-fuzz, no nightly: the coverage instrumentation is plain -C flags).
#
#   fuzz/run.sh TARGET [libFuzzer options]   e.g. fuzz/run.sh jsonrpc -runs=10000000
#   fuzz/run.sh --list                       the targets
#   fuzz/run.sh --smoke [SECONDS]            every target for SECONDS (default 8) each
#
# Seeds are fuzz/corpus/TARGET (real messages, read only); what the fuzzer
# finds goes to fuzz/target/corpus/TARGET, failing inputs to
# fuzz/target/artifacts/ (fuzz/target/smoke/ for --smoke). Limits: an input
# runs at most 10 s (a hang); one allocation past 512 MiB aborts (limit.rs)
# and the process may hold at most 2 GiB (unbounded allocation).
set -eu
cd "$(dirname "$0")"
TARGETS="jsonrpc http_request sse lines amqp_delivery config uri_template"
if [ "${1:-}" = "--list" ]; then echo "$TARGETS"; exit 0; fi

# The smoke run builds quicker code (profile `smoke`, opt-level 1); long
# runs build for speed (`release`).
PROFILE=release
if [ "${1:-}" = "--smoke" ]; then PROFILE=smoke; fi
HOST=$(rustc -vV | sed -n 's/^host: //p')
# With --target, RUSTFLAGS reach only the target's crates (not build
# scripts or proc macros).
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
    cargo build --quiet --profile "$PROFILE" --target "$HOST" --target-dir target --bins
BIN=target/$HOST/$PROFILE
ARTIFACTS=target/artifacts

run() {
    target=$1
    shift
    mkdir -p "target/corpus/$target" "$ARTIFACTS"
    "$BIN/$target" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$ARTIFACTS/$target-" -print_final_stats=1 \
        "$@" "target/corpus/$target" "corpus/$target"
}

if [ "${1:-}" = "--smoke" ]; then
    ARTIFACTS=target/smoke
    rm -rf "$ARTIFACTS"
    for t in $TARGETS; do
        echo "== $t"
        status=0
        run "$t" -max_total_time="${2:-8}" > target/smoke.log 2>&1 || status=$?
        grep -E "^stat::number_of_executed_units|ERROR|panicked" target/smoke.log || true
        if [ "$status" -ne 0 ]; then
            tail -20 target/smoke.log
            echo "fuzz target $t failed (exit $status); inputs in $ARTIFACTS/"
            exit 1
        fi
    done
    exit 0
fi
[ $# -ge 1 ] || { echo "usage: fuzz/run.sh TARGET [options] | --list | --smoke [SECONDS]" >&2; exit 2; }
run "$@"
