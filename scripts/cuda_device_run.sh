#!/usr/bin/env bash
# One call on a GPU machine: build the CUDA plugin there (unless a prebuilt
# one sits in $PREBUILT), run the GPU-vs-CPU tests and the benchmarks
# against PyTorch. The host programs (build/test_cuda, build/cuda_bench)
# and the OpenBLAS libraries they need may be prebuilt elsewhere and passed
# in $HOSTBIN / $HOSTLIB (the GPU image need not have OpenBLAS). With
# $EXSTAGE (made by scripts/pack_device_elixir.sh) it also runs the ExUnit
# GPU tests, and takes the libraries from there.
# TEST_CUDA=0, EXUNIT=0, DEMOS=0 leave those parts out; MODELS=1 adds the
# Bumblebee models (with EXSTAGE). Logs go to $OUT (or ./out).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
BIN=${HOSTBIN:-build}
if [ -n "${EXSTAGE:-}" ]; then
  mkdir -p /tmp/ex && tar -xJf "$EXSTAGE/beam.txz" -C /tmp/ex && tar -xJf "$EXSTAGE/libs.txz" -C /tmp/ex
  # Elixir's install root, unpacked as /tmp/ex/elixir.
  mkdir -p /tmp/ex/elixir && tar -xJf "$EXSTAGE/elixir.txz" -C /tmp/ex/elixir --strip-components=1
  # The application and its dependencies (Nx, ...), compiled here.
  EX_PATHS=()
  for d in "$EXSTAGE"/apps/*/ebin; do EX_PATHS+=(-pa "$d"); done
  # Debian's erl scripts name their root; point them at the unpacked one.
  sed -i 's|^\( *ROOTDIR=\)/usr/lib/erlang|\1/tmp/ex/usr/lib/erlang|' \
    /tmp/ex/usr/lib/erlang/bin/erl /tmp/ex/usr/lib/erlang/erts-*/bin/erl
  HOSTLIB=${HOSTLIB:-/tmp/ex/lib}
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
if [ -n "${PREBUILT:-}" ] && [ -f "$PREBUILT/libemily_cuda.so" ]; then
  cp "$PREBUILT/libemily_cuda.so" "$BIN/"
else
  start=$(date +%s)
  make -s -j"$(nproc)" NVCC_EXTRA="-split-compile=0" build/libemily_cuda.so 2>&1 | tail -30 | tee "$OUT/build.log"
  echo "plugin build: $(( $(date +%s) - start )) s"
  [ "$BIN" != build ] && cp build/libemily_cuda.so "$BIN/"
  cp build/libemily_cuda.so "$OUT/" 2>/dev/null
fi
export LD_LIBRARY_PATH=${HOSTLIB:+$HOSTLIB:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# gpukern (issue 16): cuDNN for conv, loaded by the plugin with dlopen: the
# toolkit's copy (found beside cuBLAS), else PyTorch's pip package
# nvidia-cudnn-cu13 when installed (EMILY_CUDNN_LIB, unless already set).
if [ -z "${EMILY_CUDNN_LIB:-}" ] && ! ls /usr/local/cuda/lib64/libcudnn.so.9 >/dev/null 2>&1; then
  cudnn_dir=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null)
  [ -n "$cudnn_dir" ] && [ -e "$cudnn_dir/libcudnn.so.9" ] && export EMILY_CUDNN_LIB=$cudnn_dir
fi
echo "cuDNN: ${EMILY_CUDNN_LIB:-toolkit/default search path}"
if [ "${TEST_CUDA:-1}" = 1 ]; then
  echo "== test_cuda"
  timeout "${TEST_TIMEOUT:-240}" "$BIN/test_cuda" > "$OUT/test_cuda.log" 2>&1
  echo "test_cuda exit $?"
  grep -E "^FAIL|skipped|not captured" "$OUT/test_cuda.log" | head -40
  tail -14 "$OUT/test_cuda.log"
fi
if [ -n "${EXSTAGE:-}" ]; then
  # ExUnit on the GPU with the Erlang/Elixir packed by
  # scripts/pack_device_elixir.sh (the GPU image has no Elixir).
  cp build/libemily_cuda.so "$EXSTAGE/apps/emily/priv/"
  export DIGITS_CSV_GZ="$EXSTAGE/digits.csv.gz"
  ex() { # elixir with the packed runtime and apps; $@: its arguments
    ( export PATH=/tmp/ex/elixir/bin:/tmp/ex/usr/lib/erlang/bin:$PATH \
             LD_LIBRARY_PATH=/tmp/ex/lib:$LD_LIBRARY_PATH
      timeout "${EX_TIMEOUT:-300}" elixir "${EX_PATHS[@]}" "$@" )
  }
  # Nx on {Emily.Backend, device: :gpu}: the GPU tests, then Nx's doctests
  # and the differential test against Nx.BinaryBackend with Emily's side on
  # the GPU (EMILY_TEST_DEVICE=gpu).
  exunit_files=(${EXUNIT_FILES:-test/emily/gpu_test.exs test/emily/compiler/cuda_graph_test.exs
                test/nx/nx_doctest_test.exs test/emily/backend/differential_test.exs})
  [ "${EXUNIT:-1}" = 1 ] || exunit_files=()
  for file in "${exunit_files[@]}"; do
    echo "== ExUnit $file (GPU)"
    log="$OUT/exunit_$(basename "$file" .exs).log"
    EMILY_TEST_DEVICE=gpu ex -e 'Application.ensure_all_started(:emily)' \
      -r test/test_helper.exs -r "$file" > "$log" 2>&1
    echo "exit $?"
    grep -E "^\s+[0-9]+\) test|\*\* \(|tests?, " "$log" | head -30
  done
  if [ "${MODELS:-0}" = 1 ]; then
    # Bumblebee on the GPU (the stage's apps include Bumblebee and the
    # tokenizers library when packed from a test build): Qwen3 against
    # transformers' goldens, then the Qwen3-0.6B-shaped generation
    # benchmark with its PyTorch counterpart.
    echo "== ExUnit test/emily/bumblebee/qwen3_test.exs (GPU)"
    EMILY_TEST_DEVICE=gpu ex -e 'Application.ensure_all_started(:emily); Application.ensure_all_started(:bumblebee)' \
      -r test/test_helper.exs -r test/emily/bumblebee/qwen3_test.exs > "$OUT/exunit_qwen3.log" 2>&1
    echo "exit $?"
    grep -E "^\s+[0-9]+\) test|\*\* \(|tests?, " "$OUT/exunit_qwen3.log" | head -20
    for args in "--gpu" "--gpu --stock"; do
      echo "== bench/qwen3_bench.exs $args"
      ex -e 'Application.ensure_all_started(:emily); Application.ensure_all_started(:bumblebee); Code.eval_file("bench/qwen3_bench.exs")' \
        $args 2>&1 | tail -8
    done
    echo "== bench/qwen3_torch.py --gpu"
    timeout "${BENCH_TIMEOUT:-240}" python3 bench/qwen3_torch.py --gpu 2>&1 | tail -8
  fi
  demos=("axon_digits.exs 10 --gpu" "mlp_digits.exs 12 --gpu" "serving.exs --gpu")
  [ "${DEMOS:-1}" = 1 ] || demos=()
  for demo in "${demos[@]}"; do
    echo "== examples/$demo"
    set -- $demo
    file=$1
    shift
    ex -e "Application.ensure_all_started(:emily); Code.eval_file(\"examples/$file\")" "$@" 2>&1 |
      tr '\r' '\n' | grep -vE "^Epoch: [0-9]+, Batch: ([0-9]|[0-3][0-9]|4[0-2])," | grep -vE "^ +\(|^epoch .*\[[#.]*\]$" | tail -30
  done
fi
if [ "${SKIP_BENCH:-0}" != 1 ] && [ -x "$BIN/cuda_bench" ]; then
  echo "== bench"
  PYTHONUNBUFFERED=1 timeout "${BENCH_TIMEOUT:-240}" python3 bench/cuda_torch.py "$BIN/cuda_bench" 2>&1 | tee "$OUT/bench.log" | grep -v "^RESULT"
fi
# gpukern (issue 16): softmax/norm rows and the other transformer kernels,
# conv on its two paths (cuDNN, im2col) against PyTorch, and the host cost
# of an eager op with the launch in parts (RESULT lines shown as they are).
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  for b in cuda_transformer cuda_conv; do
    [ -x "$BIN/${b}_bench" ] || continue
    echo "== ${b}_bench"
    PYTHONUNBUFFERED=1 timeout "${BENCH_TIMEOUT:-240}" python3 "bench/${b}_torch.py" "$BIN/${b}_bench" 2>&1 |
      tee "$OUT/${b}.log" | grep -v "^RESULT"
  done
  if [ -x "$BIN/cuda_bench" ]; then
    echo "== cuda_bench --eager"
    timeout "${BENCH_TIMEOUT:-240}" "$BIN/cuda_bench" --eager 2>&1 | tee "$OUT/eager.log"
    # The same with every kernel loaded at start: whether CUDA's lazy
    # loading (the default) costs anything per launch once warm.
    echo "== cuda_bench --eager (CUDA_MODULE_LOADING=EAGER)"
    CUDA_MODULE_LOADING=EAGER timeout "${BENCH_TIMEOUT:-240}" "$BIN/cuda_bench" --eager 2>&1 |
      tee "$OUT/eager_module_eager.log" | grep -E "eager_add|eager_probe"
  fi
fi
# The decode step as a CUDA graph (when built: make build/cuda_graph_bench).
if [ "${SKIP_BENCH:-0}" != 1 ] && [ -x "$BIN/cuda_graph_bench" ]; then
  echo "== cuda_graph_bench"
  timeout "${BENCH_TIMEOUT:-240}" "$BIN/cuda_graph_bench" 2>&1 | tee "$OUT/cuda_graph_bench.log"
fi
