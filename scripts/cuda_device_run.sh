#!/usr/bin/env bash
# One call on a GPU machine: build the CUDA plugin there (unless a prebuilt
# one sits in $PREBUILT), run the GPU-vs-CPU tests and the benchmarks
# against PyTorch. The host programs (build/test_cuda, build/cuda_bench)
# and the OpenBLAS libraries they need may be prebuilt elsewhere and passed
# in $HOSTBIN / $HOSTLIB (the GPU image need not have OpenBLAS). With
# $EXSTAGE (made by scripts/pack_device_elixir.sh) it also runs the ExUnit
# GPU tests, and takes the libraries from there.
# TEST_CUDA=0, EXUNIT=0, DEMOS=0 leave those parts out; MODELS=1 adds the
# Bumblebee models (with EXSTAGE), MINILM=1 the MiniLM GPU benchmark (with
# EXSTAGE). Logs go to $OUT (or ./out).
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
    IFS=';' read -ra qwen3_variants <<< "${QWEN3_VARIANTS:---gpu;--gpu --cuda-graph;--gpu --stock}"
    for args in "${qwen3_variants[@]}"; do
      echo "== bench/qwen3_bench.exs $args"
      ex -e 'Application.ensure_all_started(:emily); Application.ensure_all_started(:bumblebee); Code.eval_file("bench/qwen3_bench.exs")' \
        $args 2>&1 | tail -8
    done
    echo "== bench/qwen3_torch.py --gpu"
    timeout "${BENCH_TIMEOUT:-240}" python3 bench/qwen3_torch.py --gpu 2>&1 | tail -8
  fi
  demos=("axon_digits.exs 10 --gpu" "mlp_digits.exs 12 --gpu" "serving.exs --gpu")
  [ "${DEMOS:-1}" = 1 ] || demos=()
  if [ "${DEMOS:-1}" = 1 ] || [ "${DIGITS_BENCH:-0}" = 1 ]; then
    # The digits MLP's training step on the CPU, the GPU and as a CUDA graph.
    echo "== bench/digits_train_bench.exs --gpu"
    ex -e 'Application.ensure_all_started(:emily); Code.eval_file("bench/digits_train_bench.exs")' \
      --gpu 2>&1 | grep -E "^\||^digits|\*\*"
  fi
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
# Transformer kernels (norms, softmax, attention decode and prefill,
# matvecs) against PyTorch in the same call (when built: make
# build/cuda_transformer_bench).
if [ "${SKIP_BENCH:-0}" != 1 ] && [ -x "$BIN/cuda_transformer_bench" ]; then
  echo "== cuda_transformer_bench"
  PYTHONUNBUFFERED=1 timeout "${BENCH_TIMEOUT:-240}" python3 bench/cuda_transformer_torch.py "$BIN/cuda_transformer_bench" 2>&1 | tee "$OUT/cuda_transformer_bench.log" | grep -v "^RESULT"
fi
# all-MiniLM-L6-v2 batch 32 x 128 on the GPU against PyTorch eager and
# torch.compile (MINILM=1, with EXSTAGE and the model in $EMILY_MODELS or
# ~/.cache/emily/models; the tokenizer outside the timed region on both).
if [ "${MINILM:-0}" = 1 ] && [ -n "${EXSTAGE:-}" ]; then
  IFS=';' read -ra minilm_variants <<< "${MINILM_VARIANTS:---gpu;--gpu --bf16;--gpu --bf16 --graph;--gpu --stock}"
  for args in "${minilm_variants[@]}"; do
    echo "== bench/minilm_bench.exs $args"
    ex -e 'Application.ensure_all_started(:emily); Application.ensure_all_started(:bumblebee); Code.eval_file("bench/minilm_bench.exs")' \
      $args 2>&1 | tail -4
  done
  echo "== bench/minilm_torch.py"
  timeout "${BENCH_TIMEOUT:-240}" python3 bench/minilm_torch.py ${EMILY_MODELS:+$EMILY_MODELS/all-minilm-l6-v2} 2>&1 | tail -12
fi
# Quantized matrix-vector products (wt-quant, issue 16): ggml blocks and
# the affine format against the copy rate (when built: make
# build/cuda_quant_bench); SMOLLM2=1 adds the SmolLM2-135M Q4_1 figure:
# Emily (bench/smollm2_bench.exs --gpu, with $EXSTAGE) and PyTorch on the
# dequantized weights (bench/smollm2_torch.py), both reading
# $EMILY_MODELS/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (default
# ~/.cache/emily/models).
if [ "${SKIP_BENCH:-0}" != 1 ] && [ -x "$BIN/cuda_quant_bench" ]; then
  echo "== cuda_quant_bench"
  timeout "${BENCH_TIMEOUT:-240}" "$BIN/cuda_quant_bench" 2>&1 | tee "$OUT/cuda_quant_bench.log"
fi
if [ "${SMOLLM2:-0}" = 1 ]; then
  if [ -n "${EXSTAGE:-}" ]; then
    echo "== bench/smollm2_bench.exs --gpu"
    ex -e 'Application.ensure_all_started(:emily); Application.ensure_all_started(:bumblebee); Code.eval_file("bench/smollm2_bench.exs")' \
      --gpu 2>&1 | tee "$OUT/smollm2_bench.log" | tail -8
  fi
  echo "== bench/smollm2_torch.py"
  timeout "${BENCH_TIMEOUT:-240}" python3 bench/smollm2_torch.py \
    --gguf "${EMILY_MODELS:-$HOME/.cache/emily/models}/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" \
    2>&1 | tee "$OUT/smollm2_torch.log" | tail -12
fi
# ---- decode path (issue 16 item 2; make build/qwen3_decode_bench
# build/cuda_transformer_bench). The Qwen3-shaped decode step with a KV
# cache against PyTorch: batches at cache 512, then the cache curve at
# batch 1 (DECODE_B / DECODE_L / DECODE_CURVE_L override; DECODE=0 skips).
if [ "${SKIP_BENCH:-0}" != 1 ] && [ "${DECODE:-1}" = 1 ] && [ -x "$BIN/qwen3_decode_bench" ]; then
  for grid in "${DECODE_B:-1,4,16} 512" "1 ${DECODE_CURVE_L:-128,2048,8192}"; do
    echo "== qwen3_decode_bench B L = $grid"
    PYTHONUNBUFFERED=1 timeout "${DECODE_TIMEOUT:-400}" python3 bench/qwen3_decode_torch.py \
      "$BIN/qwen3_decode_bench" $grid 2>&1 | tee -a "$OUT/qwen3_decode.log" | grep -v "^RESULT"
  done
fi
# The decode path's kernels alone against PyTorch (fast_linear GB/s at the
# decode shapes, decode attention).
if [ "${SKIP_BENCH:-0}" != 1 ] && [ "${DECODE:-1}" = 1 ] && [ -x "$BIN/decode_kernels_bench" ]; then
  echo "== decode_kernels_bench"
  PYTHONUNBUFFERED=1 timeout "${BENCH_TIMEOUT:-240}" python3 bench/decode_kernels_torch.py \
    "$BIN/decode_kernels_bench" 2>&1 | tee "$OUT/decode_kernels.log" | grep -v "^RESULT"
fi
