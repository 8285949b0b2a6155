#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build and test Emily:
# a C compiler and make, Elixir/Erlang (with the NIF headers), OpenBLAS,
# LAPACKE, and numpy for the oracle tests. Idempotent; silent when there is
# nothing to do.
set -euo pipefail

# clang + libclang-rt-14-dev: the libFuzzer targets (test/fuzz); valgrind: memcheck of the C tests;
# python3-sklearn: the 8x8 digits data set of examples/mlp_digits.exs.
packages=(build-essential elixir erlang-dev libopenblas-dev liblapacke-dev python3-numpy
          clang libclang-rt-14-dev valgrind python3-sklearn)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
