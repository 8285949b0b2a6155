#!/usr/bin/env bash
# Check the conv / window / erf_inv GPU paths without a GPU: their kernels
# (src/cuda/{window,conv,erfinv}.cu) are rewritten into host C++ and run
# for every (block, thread) in turn inside a stand-in plugin
# (scripts/cuda_emulate/mock_api.cpp: host memory, copies, a naive GEMM),
# which libemily loads through EMILY_CUDA_LIB; then test_conv.c's families
# compare it with the CPU backend exactly as on a GPU. It checks the
# kernels' index arithmetic and the engine's job structs (gpu_window.c,
# gpu_conv.c), not CUDA itself (no races, no cuBLAS, no device limits).
#
#   scripts/cuda_emulate.sh            # BUILD=build by default
set -euo pipefail
BUILD=${BUILD:-build}
E=$BUILD/emulate
mkdir -p "$E"
for f in window conv erfinv; do
  python3 scripts/cuda_emulate/transform.py "src/cuda/$f.cu" "$E/$f.cpp"
done
g++ -std=c++20 -O1 -shared -fPIC -Wall -Wextra -Wno-unused-parameter \
  -Wno-unknown-pragmas -Iinclude -Iscripts/cuda_emulate -Isrc/cuda -Isrc/engine \
  scripts/cuda_emulate/mock_api.cpp "$E"/window.cpp "$E"/conv.cpp "$E"/erfinv.cpp \
  -o "$E/libemily_cuda_emulated.so"
make -s BUILD="$BUILD" "$BUILD/libemily.a"
gcc -std=gnu11 -O1 -g -Iinclude -Itest/cuda scripts/cuda_emulate/main.c \
  test/cuda/support.c test/cuda/test_conv.c "$BUILD/libemily.a" \
  -lopenblas -llapacke -lm -ldl -pthread -o "$E/test_emulated"
EMILY_CUDA_LIB="$E/libemily_cuda_emulated.so" "$E/test_emulated"
