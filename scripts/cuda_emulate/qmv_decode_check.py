#!/usr/bin/env python3
"""Check the quantized matrix-vector kernels' decoders without a GPU.

    python3 scripts/cuda_emulate/qmv_decode_check.py   (needs g++ and numpy)

Cuts the device functions that read and decode one 32-weight unit out of
src/cuda/qmv.cuh (load_span, word_at, bytes_to_floats, ...),
src/cuda/ggml_matvec.cu (Unit<T>::load / decode for every ggml block
format) and src/cuda/quant_matvec.cu (unpack_codes), compiles them as host
C++ with stand-ins for the CUDA intrinsics they use (__ldg, __byte_perm,
__funnelshift_r, ...), and compares, for every unit of
test/oracle/golden/ggml_blocks.npz (ggml's own dequantizers' output), the
weights a * q + b the kernels multiply with the golden values, bit for
bit, with each row copied to an odd address (the aligned-word loads);
the affine unpacking against a scalar bit-stream reader. What it does not
check: the kernels' work split, x loads and reductions (test/cuda does,
on a GPU).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src", "cuda")


def cut(path, start, stop):
    text = open(os.path.join(SRC, path)).read()
    return text[text.index(start):text.index(stop)]


SHIM = r'''
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
enum { EM_GGML_Q4_0 = 2, EM_GGML_Q4_1 = 3, EM_GGML_Q5_0 = 6, EM_GGML_Q5_1 = 7,
       EM_GGML_Q8_0 = 8, EM_GGML_Q4_K = 12, EM_GGML_Q5_K = 13, EM_GGML_Q6_K = 14 };
template <class T> T __ldg(const T *p) { return *p; }
static uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, unsigned s) {
    return (uint32_t)((((uint64_t)hi << 32) | lo) >> (s & 31));
}
static uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
    uint8_t b[8];
    memcpy(b, &x, 4);
    memcpy(b + 4, &y, 4);
    uint32_t r = 0;
    for (int i = 0; i < 4; i++)
        r |= (uint32_t)b[(s >> (4 * i)) & 7] << (8 * i);
    return r;
}
static float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
struct half_bits { unsigned short v; };
static half_bits __ushort_as_half(unsigned short v) { return {v}; }
static float __half2float(half_bits h) { _Float16 f; memcpy(&f, &h.v, 2); return (float)f; }
static float __fmul_rn(float a, float b) { return a * b; }
'''

MAIN = r'''
static std::vector<uint8_t> slurp(const char *dir, const char *name, const char *what) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s_%s.bin", dir, name, what);
    std::vector<uint8_t> v;
    FILE *f = fopen(p, "rb");
    if (!f) { perror(p); return v; }
    for (int c; (c = fgetc(f)) != EOF;) v.push_back((uint8_t)c);
    fclose(f);
    return v;
}
template <int T> int check(const char *dir, const char *name, int rows, int K) {
    using U = Unit<T>;
    auto raw = slurp(dir, name, "raw"), deqb = slurp(dir, name, "deq");
    const float *deq = (const float *)deqb.data();
    const int64_t rb = K / U::elems * U::bytes;
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        std::vector<uint8_t> buf(rb + 8);
        memcpy(buf.data() + 3, raw.data() + r * rb, rb);
        for (int64_t u = 0; u < K / 32; u++) {
            typename U::Raw w;
            U::load(buf.data() + 3, u, w);
            float q[32], a[2], b[2];
            U::decode(w, u, q, a, b);
            for (int i = 0; i < 32; i++) {
                const float v = U::bias ? a[i / 16] * q[i] + b[i / 16] : a[i / 16] * q[i];
                const float want = deq[r * K + u * 32 + i];
                if (memcmp(&v, &want, 4) != 0 && !(v == want) && bad++ < 3)
                    printf("%s row %d unit %lld weight %d: %.9g, want %.9g\n", name, r,
                           (long long)u, i, v, want);
            }
        }
    }
    printf("%-5s %s\n", name, bad ? "FAIL" : "ok");
    return bad;
}
template <int B> int check_affine() {
    int bad = 0;
    uint64_t s = 88172645463325252ull;
    for (int it = 0; it < 1000; it++) {
        uint32_t w[B];
        for (int i = 0; i < B; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            w[i] = (uint32_t)s;
        }
        float q[32];
        unpack_codes<B>(w, q);
        for (int i = 0; i < 32; i++) {
            const int bit = i * B;
            uint32_t v = w[bit / 32] >> (bit % 32);
            if (bit % 32 + B > 32)
                v |= w[bit / 32 + 1] << (32 - bit % 32);
            v &= (1u << B) - 1;
            if (q[i] != (float)v && bad++ < 3)
                printf("affine bits %d code %d: %g, want %u\n", B, i, q[i], v);
        }
    }
    printf("affine bits %d %s\n", B, bad ? "FAIL" : "ok");
    return bad;
}
int main(int argc, char **argv) {
    const char *d = argv[1];
    const int R = atoi(argv[2]), K = atoi(argv[3]);
    int bad = check<EM_GGML_Q4_0>(d, "q4_0", R, K) + check<EM_GGML_Q4_1>(d, "q4_1", R, K) +
              check<EM_GGML_Q5_0>(d, "q5_0", R, K) + check<EM_GGML_Q5_1>(d, "q5_1", R, K) +
              check<EM_GGML_Q8_0>(d, "q8_0", R, K) + check<EM_GGML_Q4_K>(d, "q4_k", R, K) +
              check<EM_GGML_Q5_K>(d, "q5_k", R, K) + check<EM_GGML_Q6_K>(d, "q6_k", R, K);
    bad += check_affine<2>() + check_affine<3>() + check_affine<4>() + check_affine<5>() +
           check_affine<6>() + check_affine<8>();
    return bad != 0;
}
'''


def main():
    code = (SHIM
            + cut("qmv.cuh", "template <int N>\n__device__ __forceinline__ void load_span",
                  "// Two elements of dtype D")
            + cut("ggml_matvec.cu", "// Four bytes' low (high) nibbles",
                  "template <int T, int D, int MAXM>\n__global__")
            + cut("quant_matvec.cu", "template <int B> __device__ __forceinline__ void unpack_codes",
                  "// The `bits` words of a unit")
            + "#include <cstdlib>\n" + MAIN)
    golden = np.load(os.path.join(ROOT, "test", "oracle", "golden", "ggml_blocks.npz"))
    with tempfile.TemporaryDirectory() as tmp:
        rows = k = None
        for name in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k"):
            golden[name + "_raw"].tofile(os.path.join(tmp, name + "_raw.bin"))
            deq = golden[name + "_deq"].astype(np.float32)
            deq.tofile(os.path.join(tmp, name + "_deq.bin"))
            rows, k = deq.shape
        src, exe = os.path.join(tmp, "check.cpp"), os.path.join(tmp, "check")
        open(src, "w").write(code)
        subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-o", exe, src], check=True)
        sys.exit(subprocess.run([exe, tmp, str(rows), str(k)]).returncode)


if __name__ == "__main__":
    main()
