# Build of libemily (C11 engine), the NIF and the C tests.
#
#   make              engine + NIF (priv/emily_nif.so)
#   make test-c       C tests (hand-computed values) + numpy oracle tests
#   make asan         C tests under AddressSanitizer and UBSan
#   make SIMD=baseline  everything with only the baseline clone of the hot
#                     loops (no AVX2/AVX-512 dispatch), in build/baseline
#
# The Mix compiler (lib/mix/tasks/compile.emily_nif.ex) runs `make nif` and
# passes ERL_INCLUDE; run standalone, it is asked from `erl`.

CC ?= cc
# SIMD=baseline: compile the hot loops for the baseline x86-64 only (see
# EM_TARGET_CLONES in src/engine/internal.h), into a build dir of its own.
SIMD ?=
ifeq ($(SIMD),baseline)
BUILD ?= build/baseline
SIMD_FLAGS := -DEM_SIMD_BASELINE
else ifneq ($(SIMD),)
$(error SIMD must be empty or "baseline", got "$(SIMD)")
endif
BUILD ?= build
OPT ?= -O2
WARN := -Wall -Wextra -Wno-unused-parameter
# No errno or FP-flag reads anywhere: let the vectoriser treat math as pure.
CFLAGS_COMMON := -std=gnu11 $(OPT) -g -fPIC -fno-math-errno -fno-trapping-math $(WARN) \
                 -Iinclude -Isrc/engine -I/usr/include/x86_64-linux-gnu/openblas-pthread \
                 -pthread $(SIMD_FLAGS) $(EXTRA_CFLAGS)
LIBS := -lopenblas -llapacke -lm -ldl -pthread

ENGINE_SRC := $(sort $(wildcard src/engine/*/*.c))
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
NIF_SRC := $(sort $(wildcard src/nif/*.c))
NIF_OBJ := $(NIF_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(sort $(wildcard test/c/*.c))

ERL_INCLUDE ?= $(shell erl -noshell -eval 'io:format("~ts/erts-~ts/include", [code:root_dir(), erlang:system_info(version)]), halt().' 2>/dev/null)

.PHONY: all nif lib test-c asan clean cuda
all: nif lib

lib: $(BUILD)/libemily.a $(BUILD)/libemily.so
nif: priv/emily_nif.so

$(BUILD)/%.o: %.c include/emily.h include/emily_ops.h src/engine/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -MMD -MP -c $< -o $@

$(BUILD)/src/nif/%.o: src/nif/%.c include/emily.h include/emily_ops.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -I"$(ERL_INCLUDE)" -MMD -MP -c $< -o $@

$(BUILD)/libemily.a: $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Shared library with the public API exported (for the numpy oracle tests
# through ctypes, and for C programs that link libemily).
$(BUILD)/libemily.so: $(ENGINE_OBJ)
	$(CC) -shared -o $@ $^ $(LIBS)

# priv/emily_nif.so is the one NIF of every build dir (build, build/baseline,
# build/asan-nif, ...): priv/.nif-build names the dir it was last linked
# from, and a build from another dir relinks it, so a baseline or sanitized
# NIF is never left behind for a plain `mix test`.
NIF_STAMP := priv/.nif-build
ifneq ($(filter all nif priv/emily_nif.so,$(or $(MAKECMDGOALS),all)),)
$(shell mkdir -p priv; [ "$$(cat $(NIF_STAMP) 2>/dev/null)" = "$(BUILD)" ] || echo "$(BUILD)" > $(NIF_STAMP))
endif

priv/emily_nif.so: $(NIF_OBJ) $(BUILD)/libemily.a $(NIF_STAMP)
	@mkdir -p priv
	$(CC) -shared -o $@ $(NIF_OBJ) $(BUILD)/libemily.a $(LIBS)

$(BUILD)/test_engine: $(TEST_SRC) $(BUILD)/libemily.a test/c/test.h
	$(CC) $(CFLAGS_COMMON) -o $@ $(TEST_SRC) $(BUILD)/libemily.a $(LIBS)

test-c: $(BUILD)/test_engine $(BUILD)/libemily.so
	$(BUILD)/test_engine
	EMILY_LIB=$(BUILD)/libemily.so /usr/bin/python3 test/oracle/run_oracle.py

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  LIBS="$(LIBS) -fsanitize=address,undefined" build-asan/test_engine
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-asan/test_engine

# CUDA backend: libemily_cuda.so, loaded by libemily with dlopen on first GPU
# use (never linked). Built when nvcc exists; copied next to the NIF.
# Host code is compiled with warnings as errors (CUDA_WERROR=0 to relax).
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_ARCH ?= -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90
CUDA_WERROR ?= 1
comma := ,
CUDA_HOST_FLAGS := -fPIC -Wall -Wextra -Wno-unused-parameter$(if $(filter 1,$(CUDA_WERROR)),$(comma)-Werror)
NVCCFLAGS ?= -O3 -std=c++20 $(CUDA_ARCH) -Xcompiler "$(CUDA_HOST_FLAGS)" \
             --expt-relaxed-constexpr -Iinclude -Isrc/cuda $(NVCC_EXTRA)
CUDA_SRC := $(sort $(wildcard src/cuda/*.cu))
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/%.o)

cuda: $(BUILD)/libemily_cuda.so priv/libemily_cuda.so

$(BUILD)/src/cuda/%.o: src/cuda/%.cu src/cuda/emily_cuda.h src/cuda/common.cuh src/cuda/ewlaunch.cuh $(wildcard src/cuda/*_ops.cuh) src/cuda/dtype.cuh include/emily_ops.h include/emily.h src/engine/ops/threefry.h src/engine/ops/erfinv.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# The quantized matrix-vector kernels' shared header (wt-quant): only the
# files that include it depend on it.
$(BUILD)/src/cuda/ggml.o $(BUILD)/src/cuda/ggml_matvec.o $(BUILD)/src/cuda/quant.o \
    $(BUILD)/src/cuda/quant_matvec.o: src/cuda/qmv.cuh

# The fused kernels are compiled at run time by NVRTC from the same op
# headers as the kernels above, shipped inside the plugin as strings; NVRTC
# also needs the toolkit's headers (cuda_fp16.h, libcu++), found at run time
# through $$EMILY_CUDA_INCLUDE, $$CUDA_HOME or the toolkit this was built with.
CUDA_RTC_HEADERS := include/emily.h include/emily_ops.h src/cuda/dtype.cuh \
                    src/cuda/unary_ops.cuh src/cuda/binary_ops.cuh \
                    src/cuda/misc_ops.cuh src/cuda/reduce_ops.cuh \
                    src/cuda/fusion_rt.cuh
CUDA_TOOLKIT_INCLUDE := $(abspath $(dir $(NVCC))../include)
$(BUILD)/src/cuda/fusion_headers.inc: $(CUDA_RTC_HEADERS) scripts/embed_headers.sh
	@mkdir -p $(dir $@)
	sh scripts/embed_headers.sh $(CUDA_RTC_HEADERS) > $@
$(BUILD)/src/cuda/fusion.o: $(BUILD)/src/cuda/fusion_headers.inc
$(BUILD)/src/cuda/fusion.o: NVCCFLAGS += -I$(BUILD)/src/cuda \
    -DEMC_TOOLKIT_INCLUDE='"$(CUDA_TOOLKIT_INCLUDE)"'

$(BUILD)/libemily_cuda.so: $(CUDA_OBJ)
	$(NVCC) -shared -o $@ $^ -lcublas -lcufft -lcusolver -lnvrtc -ldl

priv/libemily_cuda.so: $(BUILD)/libemily_cuda.so
	@mkdir -p priv
	cp $< $@

# Compares every GPU op with the CPU backend; prints "skipped: <reason>"
# and exits 0 where no GPU, driver or plugin is available.
# One file per op family in test/cuda/, helpers in support.c.
CUDA_TEST_SRC := $(sort $(wildcard test/cuda/*.c))
$(BUILD)/test_cuda: $(CUDA_TEST_SRC) test/cuda/cuda_test.h $(BUILD)/libemily.a
	$(CC) $(CFLAGS_COMMON) -o $@ $(CUDA_TEST_SRC) $(BUILD)/libemily.a $(LIBS)

# Benchmark programs: build/cuda_bench, build/linalg_gpu_bench,
# build/cuda_conv_bench, ... from bench/<name>.c.
$(BUILD)/%_bench: bench/%_bench.c $(BUILD)/libemily.a
	$(CC) $(CFLAGS_COMMON) -o $@ $< $(BUILD)/libemily.a $(LIBS)

clean:
	rm -rf build build-asan priv/emily_nif.so priv/.nif-build priv/libemily_cuda.so

-include $(ENGINE_OBJ:.o=.d) $(NIF_OBJ:.o=.d)
