#!/usr/bin/env bash
# Cold start: the wall time from a program's start to its exit after its first kernel, with the
# driver's compilation cache empty (a fresh CUDA_CACHE_PATH per run, as on a new machine, a
# container or a CI runner) and then warm (the same cache again). Run from the folder made by
# `cargo xtask bundle`:
#
#   ./cold-start.sh [RUNS]
#
# Programs: `streamline heavy` on Streamline's embedded kernels (the machine code of the
# device's architecture); the same with `--ptx` pointing at the PTX of those kernels, which the
# driver must compile first (how every Streamline program started before machine code was
# embedded); the saxpy example, a user's one-kernel program; and PyTorch's first CUDA
# operation, both from the interpreter's start and from after `import torch`.
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=${1:-3}
now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

measure() {
  local label=$1; shift
  local cold=() warm=()
  for _ in $(seq "$runs"); do
    local cache; cache=$(mktemp -d)
    local t0; t0=$(now)
    CUDA_CACHE_PATH=$cache "$@" > /dev/null 2>&1 || { echo "$label: FAILED"; rm -rf "$cache"; return 1; }
    local t1; t1=$(now)
    CUDA_CACHE_PATH=$cache "$@" > /dev/null 2>&1 || { echo "$label: FAILED (warm)"; rm -rf "$cache"; return 1; }
    local t2; t2=$(now)
    cold+=("$(ms "$t0" "$t1")"); warm+=("$(ms "$t1" "$t2")")
    rm -rf "$cache"
  done
  printf "%-44s cold %6s ms   warm %6s ms   (median of %s; cold runs: %s)\n" "$label" \
    "$(printf '%s\n' "${cold[@]}" | median)" "$(printf '%s\n' "${warm[@]}" | median)" "$runs" "${cold[*]}"
}

status=0
# The embedded PTX of the highest portable architecture, alone (no machine code beside it).
ptx=$(mktemp -d)
trap 'rm -rf "$ptx"' EXIT
"$here/streamline" info --write-kernels "$ptx/all" > /dev/null || { echo "writing the kernels: FAILED"; exit 1; }
arch=$(ls "$ptx/all" | grep -v 'a$' | sort -V | tail -1)
cp "$ptx/all/$arch/gpu_kernels.ptx" "$ptx/all/$arch/gpu_kernels.manifest.json" "$ptx/" ||
  { echo "no embedded PTX to copy ($arch): FAILED"; exit 1; }
heavy=(heavy --n 1e6 --streams 1 --repeat 1)
measure "streamline heavy (embedded machine code)" "$here/streamline" "${heavy[@]}" || status=1
measure "streamline heavy (PTX, compiled by the driver)" \
  "$here/streamline" --ptx "$ptx/gpu_kernels.ptx" "${heavy[@]}" || status=1
measure "saxpy example (a user's one kernel)" "$here/saxpy" 1000 || status=1
if python3 -c "import torch" 2>/dev/null; then
  measure "python: import torch, first CUDA op" python3 -c \
    "import torch; x = torch.ones(1000, device='cuda'); print((x * 2).sum().item())" || status=1
  for _ in $(seq "$runs"); do
    cache=$(mktemp -d)
    CUDA_CACHE_PATH=$cache python3 -c "
import time, torch
t = time.perf_counter()
x = torch.ones(1000, device='cuda'); (x * 2).sum().item()
print(round((time.perf_counter() - t) * 1000))"
    rm -rf "$cache"
  done | median | xargs printf "%-44s cold %6s ms   (median; from after the import)\n" "torch: first CUDA op after import"
fi
exit $status
