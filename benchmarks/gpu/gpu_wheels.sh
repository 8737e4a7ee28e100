#!/usr/bin/env bash
# Download, here, the wheels that benchmarks/gpu/gpu_check.sh installs on a GPU machine without network (issue 43).
#
#   bash benchmarks/gpu/gpu_wheels.sh [DIR]        # default DIR: .gpurun/whl (benchmarks/gpu/gpu_stage.sh calls this)
#
# That machine has Python 3.12 and a CUDA build of PyTorch with numpy, safetensors, sentencepiece, sacrebleu,
# tqdm, matplotlib, requests, prometheus-client, pytest, hypothesis, aiohttp, click, h11, anyio and
# annotated-doc; it lacks the packages below. Each is taken at the version installed in this checkout's .venv
# (so pydantic-core is the one that pydantic pins), as a cp312 manylinux x86_64 or pure-Python wheel, one
# version each (two of one package stop the whole install there).
#   pydantic pydantic-core annotated-types typing-inspection   recipes and configs (tnmt.config.parse)
#   typing-extensions                                           pydantic needs >= 4.16, newer than the image may hold
#   fastapi starlette uvicorn python-multipart fastapi-offline  tnmt serve
#   opentelemetry-api                                           fastapi's lifespan imports it
#   num2words                                                   tests/conftest.py (its docopt is for its own CLI)
#   sacremoses                                                  the tokenised lower-cased BLEU of Multi30k papers
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
python=${PYTHON:-.venv/bin/python}
dest=${1:-.gpurun/whl}
packages=(pydantic pydantic-core annotated-types typing-inspection typing-extensions fastapi starlette uvicorn
  python-multipart fastapi-offline opentelemetry-api num2words sacremoses)

pins=()
for package in "${packages[@]}"; do
  version=$("$python" -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' "$package") || {
    echo "gpu_wheels: error: $package is not installed in $python's environment (run make setup)" >&2
    exit 2
  }
  pins+=("$package==$version")
done

mkdir -p "$dest"
rm -f "$dest"/*.whl
platforms=()
for platform in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${platform}_x86_64")
done
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$dest" "${pins[@]}"
echo "gpu_wheels: $(ls "$dest"/*.whl | wc -l) wheels, $(du -sh "$dest" | cut -f1), in $dest: ${pins[*]}"
