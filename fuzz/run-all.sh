#!/bin/sh
# Runs every fuzz target in turn (one at a time: the machine is small) for
# SECONDS_PER_TARGET seconds (default 300), seeding from seeds/<target>.
# Usage: fuzz/run-all.sh [seconds]   — logs go to fuzz/logs/<target>.log
set -eu
cd "$(dirname "$0")"
secs="${1:-300}"
mkdir -p logs
# daemon_api links sarena-daemon, whose build script would build the eBPF
# programs; the router needs none of them.
export AYA_BUILD_SKIP=1
for t in netconf env cni_args result netavark daemon_api; do
    mkdir -p "corpus/$t"
    seeds=""
    [ -d "seeds/$t" ] && seeds="seeds/$t"
    start=$(date +%s)
    cargo +nightly fuzz run "$t" "corpus/$t" ${seeds:+"$seeds"} -- -max_total_time="$secs" -print_final_stats=1 \
        >"logs/$t.log" 2>&1 || echo "$t: FAILED (see logs/$t.log)"
    end=$(date +%s)
    echo "$t: wall $((end - start))s; $(grep -E '^Done' "logs/$t.log" || echo 'no Done line')"
done
