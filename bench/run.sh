#!/usr/bin/env bash
# Builds libemily and the benchmarks, runs the C benchmark (Emily, copy
# ceilings, OpenBLAS direct) and the numpy benchmark, and prints one table
# with ratios Emily/copy, Emily/OpenBLAS and Emily/numpy.
#
#   bench/run.sh                 everything under OPENBLAS_CORETYPE (below)
#   BENCH_REPS=2 bench/run.sh    twice the timed runs per round
#   BENCH_ROUNDS=5 ...           five rounds of every program (default 3)
#   BENCH_NUMPY_UNSET=0 ...      skip the extra numpy run without
#                                OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
#
# numpy: Debian's (/usr/bin/python3) is the reference; when the python3 first
# on PATH is another interpreter with numpy (a PyPI wheel, bundling its own
# OpenBLAS), it runs too, labelled numpy_pypi.
#
# OPENBLAS_CORETYPE: the project's environment sets Haswell on purpose (see
# the shared reference toolchain-notes.md); when the caller has it unset
# this script sets Haswell, so that libemily, OpenBLAS direct and numpy all
# run under the same, stated setting. The one extra run labelled
# numpy_unset drops both OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for numpy
# alone, to show what OpenBLAS picks by itself on this CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

make -s lib >&2
make -s -C bench >&2

echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "# cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores;" \
     "$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "# compiler: $(${CC:-cc} --version | head -1)"
echo "# load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"

# The programs run one after another, so each runs BENCH_ROUNDS times
# (default 3) in alternation and a key's figure is the median of its
# per-round medians: a burst of load from other processes then falls on one
# round of one program, not on all of its figures.
have_pypi=0
if [ "$(command -v python3)" != "$PY" ] && python3 -c 'import numpy' 2>/dev/null; then
  have_pypi=1
fi
for round in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  build/bench/bench_engine >"$tmp/engine.$round.txt"
  # Debian's numpy shares libemily's OpenBLAS: Emily runs in that process
  # too, in alternation with numpy, for the Emily/numpy ratios.
  "$PY" bench/bench_numpy.py --emily build/libemily.so >"$tmp/numpy.$round.txt"
  # A newer numpy from PyPI, when the python3 first on PATH has one.
  if [ "$have_pypi" = 1 ]; then
    python3 bench/bench_numpy.py --label numpy_pypi >"$tmp/numpy_pypi.$round.txt"
  fi
  if [ "${BENCH_NUMPY_UNSET:-1}" != 0 ]; then
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" bench/bench_numpy.py \
      --label numpy_unset >"$tmp/numpy_unset.$round.txt"
  fi
  if [ "$round" = 1 ]; then
    grep -h '^#' "$tmp"/*.1.txt
    [ "${BENCH_NUMPY_UNSET:-1}" = 0 ] ||
      echo "# numpy_unset: the same numpy benchmark with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset"
  fi
done
echo "# rounds: ${BENCH_ROUNDS:-3}; load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"

cat > "$tmp/merge.py" <<'EOF'
import sys

# One R line per key and round: keep the median of the round medians, the
# best single run, the total runs and the spread of the round medians.
rounds, order = {}, []
for line in sys.stdin:
    _, key, work, unit, median, best, reps = line.rstrip("\n").split("\t")
    if key not in rounds:
        rounds[key] = []
        order.append(key)
    rounds[key].append(dict(work=float(work), unit=unit, median=float(median),
                            best=float(best), reps=int(reps)))


def middle(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


rows = {}
for key, rs in rounds.items():
    medians = [r["median"] for r in rs]
    rows[key] = dict(work=rs[0]["work"], unit=rs[0]["unit"],
                     median=middle(medians), best=min(r["best"] for r in rs),
                     reps=sum(r["reps"] for r in rs), lo=min(medians),
                     hi=max(medians), rounds=len(rs))


def rate(key):
    """GB/s or GFLOP/s of the median run, None when not measured."""
    r = rows.get(key)
    return None if r is None else r["work"] / r["median"] / 1e9


def fmt_rate(v):
    return "%8s" % "-" if v is None else "%8.1f" % v


def fmt_ratio(a, b):
    return "%5s" % "-" if a is None or b is None else "%5.2f" % (a / b)


print()
print("All measurements. median: the median of the per-round medians; rounds:")
print("the lowest and highest round median; best: the fastest single run;")
print("rate: from the median (GB/s counts bytes read + written)")
print("%-26s %9s %19s %9s %9s %-8s %s" % ("key", "median ms", "rounds ms",
                                          "best ms", "rate", "unit", "runs"))
for key in order:
    r = rows[key]
    print("%-26s %9.3f %9.3f-%-9.3f %9.3f %9.1f %-8s %d" % (
        key, r["median"] * 1e3, r["lo"] * 1e3, r["hi"] * 1e3, r["best"] * 1e3,
        rate(key), "GB/s" if r["unit"] == "B" else "GFLOP/s", r["reps"]))

# case, unit, reference key, its name, target (Emily rate / reference rate)
cases = [
    ("add", "GB/s", "copy/loop_2t", "copy loop 2T", 0.80),
    ("exp", "GB/s", "exp/copy_loop_2t", "copy loop 2T", 0.80),
    ("sum", "GB/s", "sum/copy_loop_2t", "copy loop 2T", None),
    ("matmul512", "GFLOP/s", "matmul512/openblas", "OpenBLAS", 0.95),
    ("matmul1024", "GFLOP/s", "matmul1024/openblas", "OpenBLAS", 0.95),
    ("matmul2048", "GFLOP/s", "matmul2048/openblas", "OpenBLAS", 0.95),
]
print()
print("Summary: rates, and ratios Emily rate / other rate (> 1: Emily faster).")
print("  Emily(C) and ref are timed alternately in bench_engine: ref is the")
print("  2-thread copy loop or cblas_sgemm called directly. Emily(py) and numpy")
print("  (Debian's, result allocated) are timed alternately in bench_numpy.py.")
print("%-11s %-8s %8s %8s %6s | %8s %8s %6s | %s" % (
    "case", "unit", "Emily(C)", "ref", "E/ref", "Emily(py)", "numpy", "E/np",
    "targets"))
for case, unit, ref_key, ref_name, target in cases:
    e = rate(case + "/emily")
    ref = rate(ref_key)
    epy = rate(case + "/emily_in_numpy")
    npd = rate(case + "/numpy")
    verdicts = []
    if target is not None and e is not None and ref is not None:
        verdicts.append("%s >= %d%%: %s" % (ref_name, round(target * 100),
                                             "met" if e / ref >= target else "MISSED"))
    if epy is not None and npd is not None:
        verdicts.append("faster than numpy: " + ("yes" if epy > npd else "NO"))
    print("%-11s %-8s %s %s %6s | %9s %s %6s | %s" % (
        case, unit, fmt_rate(e), fmt_rate(ref), fmt_ratio(e, ref),
        fmt_rate(epy), fmt_rate(npd), fmt_ratio(epy, npd), "; ".join(verdicts)))

variants = sorted({k.split("/", 1)[1] for k in rows
                   if k.split("/", 1)[1].startswith("numpy")})
print()
print("Emily against every numpy variant: numpy rate (Emily rate / numpy rate).")
print("  _out: numpy writing a reused buffer (out=); _pypi: the PyPI wheel;")
print("  _unset: without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE. Ratios use Emily")
print("  timed in the same process where it ran there, else Emily(C) from")
print("  another process (marked *, less reliable on this noisy machine).")
print("%-11s %s" % ("case", " ".join("%18s" % v for v in variants)))
for case, *_ in cases:
    cells = []
    for v in variants:
        r = rate(case + "/" + v)
        base = v[:-4] if v.endswith("_out") else v
        e, mark = rate(case + "/emily_in_" + base), ""
        if e is None:
            e, mark = rate(case + "/emily"), "*"
        cells.append("%18s" % ("-" if r is None else "%.1f (%s%s)" % (
            r, fmt_ratio(e, r).strip(), mark)))
    print("%-11s %s" % (case, " ".join(cells)))

copies = [(k, rate(k)) for k in ("copy/memcpy_1t", "copy/loop_1t",
                                  "copy/loop_2t", "copy/memcpy_2t")
          if rate(k) is not None]
if copies and rate("add/emily") is not None:
    print()
    print("add against every copy ceiling of its group: " + ", ".join(
        "%s %.2f" % (k.split("/")[1], rate("add/emily") / v) for k, v in copies))
EOF
cat "$tmp"/*.txt | grep '^R' | "$PY" "$tmp/merge.py"
