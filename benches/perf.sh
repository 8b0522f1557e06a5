#!/bin/sh
# Every bench, in one run, into PERFORMANCE.md: the comparison with rmcp and
# the ceiling (tables and benches/results/throughput.svg), then the HTTP
# idle-session memory and stateless rows, AMQP against raw amiquip, the
# daemon's startup, the gateway's hop and the supervisor's restart. The
# part of PERFORMANCE.md above the marker line is kept; what follows it is
# replaced. Takes about 15 minutes on 2 cores; run it on a quiet machine.
#
#   benches/perf.sh [--runs N]       (default 3 runs of every point)
set -eu
cd "$(dirname "$0")/.."
runs=3
[ "${1:-}" = "--runs" ] && runs=$2
out=benches/results
mkdir -p "$out"
marker='<!-- Everything below is written by benches/perf.sh. -->'

cargo bench --quiet --bench compare -- --runs "$runs" --out "$out"
cargo bench --quiet --bench http_load -- --calls 20000 --idle-sessions 100000 > "$out/http_load.txt"
cargo bench --quiet --bench amqp_load -- --calls 10000 --runs "$runs" > "$out/amqp_load.txt"
cargo bench --quiet --bench daemon_startup > "$out/daemon_startup.txt"
cargo bench --quiet --bench gateway_hop > "$out/gateway_hop.txt"
cargo bench --quiet -p supervisor --bench restart > "$out/restart.txt"

{
    awk -v m="$marker" '$0 == m { exit } { print }' PERFORMANCE.md
    echo "$marker"
    echo
    echo "## Latest run ($(date -u +%Y-%m-%d), $(nproc) cores, $(uname -r))"
    echo
    echo "![throughput against concurrency](benches/results/throughput.svg)"
    echo
    cat "$out/compare.md"
    for bench in http_load amqp_load daemon_startup gateway_hop restart; do
        echo
        echo "### $bench"
        echo
        echo '```text'
        cat "$out/$bench.txt"
        echo '```'
    done
} > PERFORMANCE.md.new
mv PERFORMANCE.md.new PERFORMANCE.md
echo "PERFORMANCE.md written"
