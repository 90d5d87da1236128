#!/usr/bin/env bash
# Compares two release builds on `wormholectl bench --suite cli` in alternating runs (A, B, A, B…),
# so that drift on a noisy machine hits both alike; prints each run's observe and listen ratios
# (p50 against the C floor measured in the same run) and their medians and spreads.
#
#   Tests/bench-alternate.sh BUILD_A BUILD_B [RUNS]
#       BUILD_A, BUILD_B: folders holding `wormholectl` and `wormhole-bench` (a `.build/release`);
#       RUNS: runs of each, 5 by default.
set -euo pipefail
a=${1:?usage: Tests/bench-alternate.sh BUILD_A BUILD_B [RUNS]}
b=${2:?usage: Tests/bench-alternate.sh BUILD_A BUILD_B [RUNS]}
runs=${3:-5}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for i in $(seq 1 "$runs"); do
    for side in A B; do
        bin=$a
        [[ $side == B ]] && bin=$b
        "$bin/wormholectl" bench --suite cli 2>/dev/null |
            awk -v side="$side" -v run="$i" '/^wormhole (observe|listen) +[0-9]/ { sub("x", "", $NF); print side, run, $2, $NF }' |
            tee -a "$results"
    done
done
python3 - "$results" <<'PY'
import collections, statistics, sys
ratios = collections.defaultdict(list)
for line in open(sys.argv[1]):
    side, _, row, ratio = line.split()
    ratios[(row, side)].append(float(ratio))
for (row, side), values in sorted(ratios.items()):
    print(f"{row:8} {side}: median {statistics.median(values):.3f}, spread {min(values):.3f}-{max(values):.3f}, n={len(values)}")
PY
