#!/usr/bin/env bash
# benchmarks/gpu/gpu_check.py on a GPU machine without network (issue 43): the carried wheels first, then the check.
#
#   cd .gpurun/src_tree && bash benchmarks/gpu/gpu_check.sh --out $OUT/gpu_check.json    # as gpu_stage.sh lays it out
#
# The wheels (benchmarks/gpu/gpu_wheels.sh) go into $GPU_SITE (default /tmp/site) with --no-index --no-deps, tnmt
# itself is used from this tree's src/ (PYTHONPATH: no build step, nothing fetched), and Multi30k comes from
# ../data/multi30k beside this tree unless --data says otherwise. Other arguments go to gpu_check.py, or to the
# script GPU_SCRIPT names in benchmarks/gpu/ (issue 55: GPU_SCRIPT=gpu_speed.py).
set -euo pipefail
tree=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${PYTHON:-python3}
wheels=${GPU_WHEELS:-$tree/../whl}
site=${GPU_SITE:-/tmp/site}
if compgen -G "$wheels/*.whl" >/dev/null; then
  "$python" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "$wheels"/*.whl
else
  echo "gpu_check.sh: no wheels in $wheels: using the packages $python has" >&2
fi
export PYTHONPATH="$site:$tree/src:$tree${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
script=${GPU_SCRIPT:-gpu_check}
exec "$python" -m "benchmarks.gpu.${script%.py}" --data "$tree/../data/multi30k" "$@"
