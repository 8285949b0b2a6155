#!/usr/bin/env bash
# The numeric tests again on the code paths another CPU would take, so that
# no expected value depends on the CPU the tests happen to run on:
#   1. under another OpenBLAS kernel set (OPENBLAS_CORETYPE): the first of
#      SkylakeX, Haswell, Sandybridge that this CPU can run and that is not
#      the set OpenBLAS picks by itself;
#   2. with the engine's hot loops built for the baseline x86-64 only
#      (make SIMD=baseline, in build/baseline: no AVX2/AVX-512 clones).
# Each runs the C engine tests, the numpy oracle tests and the ExUnit tests
# of Emily.Backend (by family, and the differential test against
# Nx.BinaryBackend), Emily.Compiler (grad included), Emily.Fast,
# quantization, weight files and Nx's doctests (linear algebra,
# dot/matmul, conv, reductions, FFT, random, ...). Called by scripts/test.sh
# after the default build passed them; expects MIX_ENV=test.
set -euo pipefail
cd "$(dirname "$0")/.."

exunit_files=(test/emily/backend test/emily/compiler test/emily/fast test/emily/quantization test/emily/io test/nx)

default_core=$(/usr/bin/python3 -c '
import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())')
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }

coretype=""
for candidate in SkylakeX Haswell Sandybridge; do
  case $candidate in
    SkylakeX) has avx512f avx512bw avx512dq avx512vl || continue ;;
    Haswell) has avx2 fma || continue ;;
    Sandybridge) has avx || continue ;;
  esac
  if [ "${candidate,,}" != "${default_core,,}" ]; then
    coretype=$candidate
    break
  fi
done

# Runs a command quietly: its summary line when it passes, all its output
# when it fails.
quiet() { # $1: the summary's pattern, then the command
  local pattern=$1 log
  shift
  log=$(mktemp)
  if "$@" >"$log" 2>&1; then
    grep -E "$pattern" "$log" | tail -1
    rm -f "$log"
  else
    cat "$log"
    rm -f "$log"
    return 1
  fi
}

run_all() { # $1: the engine's build dir
  quiet "^engine:" "$1"/test_engine
  quiet "^oracle:" env EMILY_LIB="$1"/libemily.so /usr/bin/python3 test/oracle/run_oracle.py
  quiet "tests, .* failures" mix test "${exunit_files[@]}"
}

if [ -n "$coretype" ]; then
  echo "-- OPENBLAS_CORETYPE=$coretype (OpenBLAS's own pick here: $default_core)"
  (export OPENBLAS_CORETYPE=$coretype; run_all build)
else
  echo "-- no other OpenBLAS kernel set runs on this CPU (OpenBLAS's pick: $default_core)"
fi

echo "-- baseline SIMD clone (make SIMD=baseline)"
make -s -j2 SIMD=baseline EXTRA_CFLAGS=-Werror build/baseline/libemily.so build/baseline/test_engine
# The NIF is priv/emily_nif.so whichever build dir it comes from: linked
# from build/baseline for this run, relinked from build by the next plain
# `mix compile` (the Makefile's priv/.nif-build), done here at once.
(export EMILY_MAKE_ARGS="SIMD=baseline"; run_all build/baseline)
mix compile >/dev/null
