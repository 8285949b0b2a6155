#!/usr/bin/env bash
# Every test of the project, in the order a failure is cheapest to read:
#   1. the engine and NIF build warning-free (-Werror) with gcc
#   2. C engine tests (hand-computed values)
#   3. numpy oracle tests of the engine (float64 reference, random inputs)
#   4. the C engine tests again under AddressSanitizer + UBSan
#   5. ExUnit: the Elixir API, the NIF's error paths, telemetry, debug flags
set -euo pipefail
cd "$(dirname "$0")/.."
export MIX_ENV=test

echo "== build (gcc -Werror)"
make -s -j2 EXTRA_CFLAGS=-Werror all build/test_engine

echo "== C engine tests"
build/test_engine

echo "== numpy oracle tests"
EMILY_LIB=build/libemily.so /usr/bin/python3 test/oracle/run_oracle.py

echo "== C engine tests under ASan + UBSan"
make -s -j2 asan

echo "== ExUnit"
mix test
