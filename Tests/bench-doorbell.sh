#!/usr/bin/env bash
# Compares two release builds on the notify suite's doorbell rows (`wormholectl bench --suite
# notify`) in alternating runs (A, B, A, B…), so that drift on a noisy machine hits both alike:
# for each build, the medians and spreads of the doorbell rows' p50 and p99 (µs), of the post
# seen through `wormholectl observe`'s line, and of their ratios to the libdbus floor measured in the
# same run; with `--suite rate` among the options, the post call's rows too.
#
#   Tests/bench-doorbell.sh BUILD_A BUILD_B [RUNS] [BENCH OPTIONS...]
#       BUILD_A, BUILD_B: folders holding `wormholectl` and `wormhole-bench` (a `.build/release`);
#       RUNS: runs of each, 5 by default; further options go to `wormholectl bench`.
set -euo pipefail
a=${1:?usage: Tests/bench-doorbell.sh BUILD_A BUILD_B [RUNS] [BENCH OPTIONS...]}
b=${2:?usage: Tests/bench-doorbell.sh BUILD_A BUILD_B [RUNS] [BENCH OPTIONS...]}
runs=${3:-5}
shift $(($# < 3 ? $# : 3))
suite=(--suite notify)
for option in "$@"; do [[ $option == --suite* ]] && suite=(); done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for i in $(seq 1 "$runs"); do
    for side in A B; do
        bin=$a
        [[ $side == B ]] && bin=$b
        "$bin/wormholectl" bench "${suite[@]}" "$@" --json "$scratch/$side-$i.json" >/dev/null 2>&1 ||
            echo "bench-doorbell: run $i of $side failed" >&2
    done
done
python3 - "$scratch" "$runs" "$a" "$b" <<'PY'
import json, os, statistics, sys
scratch, runs, builds = sys.argv[1], int(sys.argv[2]), {"A": sys.argv[3], "B": sys.argv[4]}
rows = ["notify-center-processes-doorbell", "notify-center-processes-doorbell-spaced",
        "notify-c-post-to-c-observe-line", "notify-center-post-to-wormhole-observe-line-doorbell",
        "rate-raw-libdbus-send-flush", "rate-center-post-no-doorbell-endpoints", "rate-center-post-one-observer-rung"]
ratios = ["notify-doorbell-p50-floor-p50", "notify-doorbell-p99-floor-p99",
          "notify-doorbell-spaced-p50-floor-spaced-p50", "notify-doorbell-spaced-p99-floor-spaced-p99",
          "notify-post-to-observe-line-doorbell-p50-c-to-c-p50", "rate-center-post-call-p50-send-flush-p50",
          "rate-center-post-call-one-observer-rung-p50-send-flush-p50"]
values = {}
for side in "AB":
    for i in range(1, runs + 1):
        path = os.path.join(scratch, f"{side}-{i}.json")
        if not os.path.exists(path):
            continue
        for row in json.load(open(path))["rows"]:
            if row["id"] in rows:
                values.setdefault((row["id"] + " p50 us", side), []).append(row["p50"])
                values.setdefault((row["id"] + " p99 us", side), []).append(row["p99"])
            if row["id"] in ratios and row["ratio"] is not None:
                values.setdefault((row["id"], side), []).append(row["ratio"])
for side, build in builds.items():
    print(f"{side}: {build}")
for (name, side), v in sorted(values.items()):
    print(f"{name:52} {side}: median {statistics.median(v):9.3f}, spread {min(v):.3f}-{max(v):.3f}, n={len(v)}")
PY
