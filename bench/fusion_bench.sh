#!/usr/bin/env bash
# Fused vs eager (unfused graph) vs numpy on an 8-op elementwise chain over
# 16M f32 and a (4096, 4096) f32 softmax. Runs the C benchmark and the numpy
# script alternately for BENCH_ROUNDS rounds (default 3) and prints one
# table: the median over rounds of each round's median time, and ratios,
# for wall time and for CPU time (all threads; steadier on a shared
# machine). The load average is printed before and after.
#
#   bench/fusion_bench.sh
#   BENCH_ROUNDS=5 BENCH_REPS=9 bench/fusion_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
rounds="${BENCH_ROUNDS:-3}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

make -s lib >&2
mkdir -p build/bench
cc -std=gnu11 -O2 -g -Wall -Wextra -pthread -Iinclude -Isrc/engine \
   -I/usr/include/x86_64-linux-gnu/openblas-pthread \
   -o build/bench/fusion_bench bench/fusion_bench.c build/libemily.a \
   -lopenblas -llapacke -lm -pthread

echo "# $(uname -m), $(nproc) cores, $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
    build/bench/fusion_bench >>"$tmp/lines"
    "$PY" bench/fusion_numpy.py >>"$tmp/lines"
done

echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" - "$tmp/lines" <<'PYEOF'
import statistics, sys
wall, cpu = {}, {}
for line in open(sys.argv[1]):
    if not line.startswith("R\t"):
        continue
    _, case, variant, med, mn, reps, c = line.rstrip("\n").split("\t")
    wall.setdefault(case, {}).setdefault(variant, []).append(float(med))
    cpu.setdefault(case, {}).setdefault(variant, []).append(float(c))
for title, times in (("wall time (median of rounds' medians)", wall),
                     ("CPU time, all threads (median of rounds' medians)", cpu)):
    print(title)
    print(f"{'case':<24}{'eager ms':>10}{'fused ms':>10}{'numpy ms':>10}"
          f"{'eager/fused':>13}{'numpy/fused':>13}")
    for case, v in times.items():
        e, f, n = (statistics.median(v[k]) * 1e3 for k in ("eager", "fused", "numpy"))
        print(f"{case:<24}{e:>10.1f}{f:>10.1f}{n:>10.1f}{e / f:>13.2f}{n / f:>13.2f}")
    print()
PYEOF
