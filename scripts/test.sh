#!/usr/bin/env bash
# Every test of the project, in the order a failure is cheapest to read:
#   1. the engine and NIF build warning-free (-Werror) with gcc, and the
#      engine with clang
#   2. C engine tests (hand-computed values); the CUDA plugin when nvcc
#      exists, and the GPU-vs-CPU tests (they print "skipped: <reason>" on
#      a machine without a GPU)
#   3. numpy oracle tests of the engine (float64 reference, random inputs);
#      then the C, oracle and Nx-level ExUnit tests again under another
#      OpenBLAS kernel set and with the baseline SIMD clone of the engine
#      (scripts/cpu_variants.sh): no expected value may depend on the CPU
#   4. the C engine tests again under AddressSanitizer + UBSan
#   5. the C engine tests under valgrind memcheck (no leaks, no invalid reads)
#   6. libFuzzer: replay the kept crash inputs, then fuzz the op constructors
#      and from_data decoding for FUZZ_SECONDS each (default 60)
#   7. mix emily.doctor (platform, NIF, BLAS, smoke test)
#   8. Nx 0.13.1's own test suite with Emily.Backend as the default backend
#      (scripts/nx_oracle.sh backend; fails on any failure of a test that
#      test/nx_suite/exclusions.exs does not exclude, or a stale exclusion),
#      then with Emily.Compiler as the default defn compiler too
#      (scripts/nx_oracle.sh compiler; about 45 s on 2 cores), and Axon
#      0.8.1's suite on Emily.Compiler (--suite axon; about 20 s)
#   9. the tokenizers library (tokenizers/, its own Mix project) against the
#      goldens of Hugging Face's tokenizers
#  10. ExUnit: the Elixir API, the NIF's error paths, telemetry, debug flags,
#      Emily.Fast, quantization, weight files, the real models through
#      Bumblebee (all-MiniLM-L6-v2 against sentence-transformers, SmolLM2
#      against llama.cpp; installed by scripts/setup.sh), Nx.Serving across
#      BEAM nodes (test/emily/serving: peer nodes on 127.0.0.1, about 10 s;
#      the test starts epmd and makes this node distributed itself), the
#      bounded soak tests and the hostile-input suite (last, so that its
#      summary line ends the output)
set -euo pipefail
cd "$(dirname "$0")/.."
export MIX_ENV=test

echo "== build (gcc -Werror)"
make -s -j2 EXTRA_CFLAGS=-Werror all build/test_engine
echo "== build (clang -Werror)"
make -s -j2 CC=clang BUILD=build/clang EXTRA_CFLAGS=-Werror build/clang/libemily.a

echo "== C engine tests"
build/test_engine

echo "== CUDA backend (plugin build, GPU-vs-CPU tests; they skip without a GPU)"
NVCC_BIN=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -n "$NVCC_BIN" ]; then
  # Host code of the plugin compiles with -Werror (CUDA_WERROR=1).
  make -s -j2 NVCC="$NVCC_BIN" CUDA_WERROR=1 cuda build/test_cuda build/cuda_bench
  build/test_cuda
else
  make -s -j2 build/test_cuda
  echo "nvcc not found: plugin not built"
  build/test_cuda
fi

echo "== numpy oracle tests"
EMILY_LIB=build/libemily.so /usr/bin/python3 test/oracle/run_oracle.py

echo "== the numeric tests under another BLAS kernel set and the baseline SIMD clone"
./scripts/cpu_variants.sh

echo "== C engine tests under ASan + UBSan"
make -s -j2 asan

echo "== C engine tests under valgrind memcheck"
# -O1: valgrind does not model every AVX compare predicate of the -O2
# vectorised kernels exactly (sign(NaN) reads back wrong under it only).
# Detached stream workers still running at exit hold their thread stacks
# ("possibly lost"): only definite and indirect leaks are errors.
make -s -j2 BUILD=build/valgrind OPT=-O1 build/valgrind/test_engine
valgrind -q --error-exitcode=1 --leak-check=full --show-possibly-lost=no \
  --errors-for-leak-kinds=definite,indirect \
  build/valgrind/test_engine

echo "== fuzzing (libFuzzer, ${FUZZ_SECONDS:-60} s per target)"
make -s -j2 -C test/fuzz all
if ! make -s -C test/fuzz run SECONDS="${FUZZ_SECONDS:-60}" >build/fuzz/run.log 2>&1; then
  tail -60 build/fuzz/run.log
  echo "fuzzing found a crash: the input is in build/fuzz/crashes/"
  exit 1
fi
grep -E "^(Running: |stat::number_of_executed_units|Done )" build/fuzz/run.log | grep -v "^Running: corpus" || true

echo "== mix emily.doctor"
mix emily.doctor

echo "== Nx's test suite on Emily.Backend"
scripts/nx_oracle.sh backend

echo "== Nx's test suite on Emily.Compiler"
scripts/nx_oracle.sh compiler

echo "== Axon's test suite on Emily.Compiler"
scripts/nx_oracle.sh compiler --suite axon

echo "== tokenizers (pure Elixir, against HF tokenizers' goldens)"
(cd tokenizers && mix test)

echo "== ExUnit"
mix test
