#!/usr/bin/env bash
# Lay out .gpurun/ for one run of the GPU check (issue 43) on a machine without network, and say how to start it.
#
#   bash benchmarks/gpu/gpu_stage.sh [REV]         # the committed tree of REV (default HEAD)
#   bash benchmarks/gpu/gpu_stage.sh --worktree    # the working tree's tracked and untracked files as they are now
#
#   .gpurun/src_tree/        the code to check, and STAGED_COMMIT naming it (gpu_check.py records it)
#   .gpurun/whl/             the wheels of benchmarks/gpu/gpu_wheels.sh
#   .gpurun/data/multi30k/   Multi30k, from TNMT_DATA_DIR or ../shared/data/multi30k
#
# .gpurun/ is ignored (.git/info/exclude). The run carries it and starts, from the repository root:
#   cd .gpurun/src_tree && bash benchmarks/gpu/gpu_check.sh --out $OUT/gpu_check.json
set -euo pipefail
root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"
stage=.gpurun
limit_mib=64  # what may travel to the machine: the working tree and the carried .gpurun together
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpurun/' "$exclude" 2>/dev/null || echo '/.gpurun/' >>"$exclude"

worktree=false
if [ "${1:-}" = "--worktree" ]; then
  worktree=true
  what="the working tree"
else
  rev=${1:-HEAD}
  what=$rev
  if ! git cat-file -e "$rev:benchmarks/gpu/gpu_check.py" 2>/dev/null; then
    echo "gpu_stage: error: benchmarks/gpu/gpu_check.py is not in $rev: commit it, or stage --worktree" >&2
    exit 2
  fi
fi
rm -rf "$stage/src_tree"
mkdir -p "$stage/src_tree"
if $worktree; then
  git ls-files -z --cached --others --exclude-standard |
    tar -c --null -T - --ignore-failed-read 2>/dev/null | tar -x -C "$stage/src_tree"
  echo "$(git rev-parse HEAD) + working tree of $(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$stage/src_tree/STAGED_COMMIT"
else
  git archive "$rev" | tar -x -C "$stage/src_tree"
  git rev-parse "$rev^{commit}" >"$stage/src_tree/STAGED_COMMIT"
fi

bash benchmarks/gpu/gpu_wheels.sh "$stage/whl"

data=${TNMT_DATA_DIR:-$root/../shared/data/multi30k}
if [ ! -f "$data/train.en.gz" ]; then
  echo "gpu_stage: error: no Multi30k in $data (set TNMT_DATA_DIR)" >&2
  exit 2
fi
rm -rf "$stage/data"
mkdir -p "$stage/data"
cp -rL "$data" "$stage/data/multi30k"
chmod -R u+w "$stage/data"  # the shared copy is read-only; the next staging replaces this one

files=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null || true)  # less deleted ones
tree_bytes=$(echo "$files" | tail -1 | cut -f1)
stage_bytes=$(du -sb "$stage" | cut -f1)
total_mib=$(((tree_bytes + stage_bytes) / 1048576))
echo "gpu_stage: $stage holds $what ($(du -sh "$stage/src_tree" | cut -f1)), $(du -sh "$stage/whl" | cut -f1) of" \
  "wheels and $(du -sh "$stage/data" | cut -f1) of data; with the working tree, $total_mib MiB travel (at most $limit_mib)"
if [ "$total_mib" -ge "$limit_mib" ]; then
  echo "gpu_stage: error: over $limit_mib MiB" >&2
  exit 1
fi
echo "gpu_stage: carry [\".gpurun\"]; command: cd .gpurun/src_tree && bash benchmarks/gpu/gpu_check.sh --out \$OUT/gpu_check.json"
