#!/usr/bin/env bash
# Packs what a GPU machine without Elixir needs to run the ExUnit GPU tests
# into folder $1: this machine's Erlang/OTP (Debian's, without the OTP apps
# the tests never load), the Elixir the project runs on (1.18.4 built by
# scripts/setup.sh, or the machine's), the BLAS and LAPACK libraries the NIF
# links, and the compiled application with its dependencies (every ebin of
# _build/test: emily, nx, complex, telemetry, axon, polaris; and the NIF).
# scripts/cuda_device_run.sh runs the tests when EXSTAGE points there.
# Run `MIX_ENV=test mix compile` first.
set -euo pipefail
dest=${1:?usage: pack_device_elixir.sh DEST}
here=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$dest/apps" "$dest/emily"
mkdir -p "$dest/root/lib" "$dest/apps"
for app in "$here"/_build/test/lib/*/; do
  mkdir -p "$dest/apps/$(basename "$app")"
  cp -r "$app/ebin" "$dest/apps/$(basename "$app")/"
done
# Emily.Native loads the NIF (and the NIF the CUDA plugin) from the emily
# app's priv dir, beside its ebin.
mkdir -p "$dest/apps/emily/priv"
cp "$here/priv/emily_nif.so" "$dest/apps/emily/priv/"
# Without its debug sections: the stage travels under a size limit.
strip "$dest/apps/emily/priv/emily_nif.so"
# The Elixir install's root (bin/ and lib/), wherever PATH finds it.
elixir_root=$(dirname "$(dirname "$(readlink -f "$(command -v elixir)")")")
# ssl and inets stay: Bumblebee (a test dependency) lists them.
skip=(wx megaco diameter common_test observer odbc et mnesia edoc eldap ftp tftp xmerl)
excludes=(--exclude='usr/lib/erlang/man')
for app in "${skip[@]}"; do excludes+=(--exclude="usr/lib/erlang/lib/$app-*"); done
tar -cJf "$dest/beam.txz" -C / "${excludes[@]}" usr/lib/erlang
tar -cJf "$dest/elixir.txz" -C "$(dirname "$elixir_root")" "$(basename "$elixir_root")"
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 liblapacke.so.3 \
  liblapack.so.3 libblas.so.3 libtmglib.so.3; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$dest/root/lib/"
done
tar -cJf "$dest/libs.txz" -C "$dest/root" lib
# The examples' data (scikit-learn's digits), for a GPU image without it.
/usr/bin/python3 -c 'import os, sklearn; print(os.path.join(os.path.dirname(sklearn.__file__), "datasets", "data", "digits.csv.gz"))' |
  xargs -I{} cp {} "$dest/digits.csv.gz"
rm -rf "$dest/root"
du -sh "$dest"
