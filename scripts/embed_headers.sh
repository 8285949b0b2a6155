#!/bin/sh
# embed_headers.sh FILE... — print a C++ initializer list of
# {"basename", R"(contents)"} pairs: the headers the CUDA plugin hands to
# NVRTC when it compiles fused kernels (src/cuda/fusion.cu).
for f in "$@"; do
    printf '{"%s", R"EMCHDR(' "$(basename "$f")"
    cat "$f"
    printf ')EMCHDR"},\n'
done
