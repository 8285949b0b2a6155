# Build of libemily (C11 engine), the NIF and the C tests.
#
#   make              engine + NIF (priv/emily_nif.so)
#   make test-c       C tests (hand-computed values) + numpy oracle tests
#   make asan         C tests under AddressSanitizer and UBSan
#
# The Mix compiler (lib/mix/tasks/compile.emily_nif.ex) runs `make nif` and
# passes ERL_INCLUDE; run standalone, it is asked from `erl`.

CC ?= cc
BUILD ?= build
OPT ?= -O2
WARN := -Wall -Wextra -Wno-unused-parameter
# No errno or FP-flag reads anywhere: let the vectoriser treat math as pure.
CFLAGS_COMMON := -std=gnu11 $(OPT) -g -fPIC -fno-math-errno -fno-trapping-math $(WARN) \
                 -Iinclude -Isrc/engine -I/usr/include/x86_64-linux-gnu/openblas-pthread \
                 -pthread $(EXTRA_CFLAGS)
LIBS := -lopenblas -llapacke -lm -pthread

ENGINE_SRC := $(sort $(wildcard src/engine/*.c src/engine/ops/*.c src/engine/autodiff/*.c))
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
NIF_SRC := $(sort $(wildcard src/nif/*.c))
NIF_OBJ := $(NIF_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(sort $(wildcard test/c/*.c))

ERL_INCLUDE ?= $(shell erl -noshell -eval 'io:format("~ts/erts-~ts/include", [code:root_dir(), erlang:system_info(version)]), halt().' 2>/dev/null)

.PHONY: all nif lib test-c asan clean
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

priv/emily_nif.so: $(NIF_OBJ) $(BUILD)/libemily.a
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

clean:
	rm -rf build build-asan priv/emily_nif.so

-include $(ENGINE_OBJ:.o=.d) $(NIF_OBJ:.o=.d)
