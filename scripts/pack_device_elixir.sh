#!/usr/bin/env bash
# Packs what a GPU machine without Elixir needs to run the ExUnit GPU tests
# (test/emily/gpu_test.exs) into folder $1: this machine's Erlang/OTP and
# Elixir (Debian's, without the OTP apps the tests never load), the BLAS and
# LAPACK libraries the NIF links, and the compiled application (ebin + the
# NIF). scripts/cuda_device_run.sh runs the tests when EXSTAGE points there.
# Run `MIX_ENV=test mix compile` first.
set -euo pipefail
dest=${1:?usage: pack_device_elixir.sh DEST}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dest/emily/priv" "$dest/root/lib"
rm -rf "$dest/emily/ebin"
cp -r "$here/_build/test/lib/emily/ebin" "$dest/emily/"
cp "$here/priv/emily_nif.so" "$dest/emily/priv/"
skip=(wx megaco diameter common_test observer odbc et mnesia edoc eldap ssl ftp tftp xmerl inets)
excludes=(--exclude='usr/lib/erlang/man')
for app in "${skip[@]}"; do excludes+=(--exclude="usr/lib/erlang/lib/$app-*"); done
tar -cJf "$dest/beam.txz" -C / "${excludes[@]}" usr/lib/erlang usr/lib/elixir
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 liblapacke.so.3 \
  liblapack.so.3 libblas.so.3 libtmglib.so.3; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$dest/root/lib/"
done
tar -cJf "$dest/libs.txz" -C "$dest/root" lib
rm -rf "$dest/root"
du -sh "$dest"
