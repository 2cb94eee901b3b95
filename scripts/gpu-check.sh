#!/usr/bin/env bash
# Runs on a GPU machine from the folder made by `cargo xtask bundle` (no Rust toolchain needed):
# the test suite, compute-sanitizer (memcheck, racecheck, synccheck) over the GPU tests, seed
# 000's experiment and the matmul with --check, the pipeline scenarios with their traces and
# timelines, the color-jitter example in augment-train, and `streamline bench`; with the anchors
# folder given, also its peers in the same run (peers.sh: torch_anchors.py, and CV-CUDA's
# cvcuda_anchors.py where its archive is there), paired with compare.py.
#
#   ./gpu-check.sh [ANCHORS_DIR] [RESULTS_DIR]
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
anchors=${1:-}
out=${2:-$here/results}
mkdir -p "$out"
status=0
step() { echo; echo "=== $*"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
"$here/streamline" info 2>&1 | tee "$out/info.txt" || status=1

step "tests"
"$here/run-tests.sh" 2>&1 | tee "$out/tests.txt" | grep -E "^(==|test result|run-tests)|FAILED|panicked|skipping" || true
grep -q "run-tests: all test binaries passed" "$out/tests.txt" || status=1

for tool in memcheck racecheck synccheck; do
  step "compute-sanitizer $tool (GPU tests)"
  PROPTEST_CASES=${SANITIZER_CASES:-6} SANITIZER="compute-sanitizer --tool $tool --require-cuda-init no --error-exitcode 9" \
    "$here/run-tests.sh" --skip sgemm_agrees_with_cublas --skip cudarc_ > "$out/sanitizer-$tool.txt" 2>&1
  rc=$?
  grep -E "SUMMARY|run-tests|test result" "$out/sanitizer-$tool.txt" | sort | uniq -c
  [ $rc -eq 0 ] || { echo "compute-sanitizer $tool: FAILED (rc $rc)"; status=1; }
done

step "seed 000: one stream vs split, with --check"
for dtype in f32 f16; do
  "$here/streamline" heavy --n 1e8 --dtype $dtype --streams 2 --repeat 20 --check 2>&1 | tee -a "$out/heavy.txt" || status=1
  "$here/streamline" heavy --n 1e6 --dtype $dtype --streams 4 --repeat 50 2>&1 | tee -a "$out/heavy.txt" || status=1
done

step "matmul: the progression at 4096 beside cuBLAS, checked; odd and large shapes"
"$here/streamline" matmul --m 4096 --n 4096 --k 4096 --kernel all --vs-cublas --check --repeat 10 2>&1 | tee -a "$out/matmul.txt" || status=1
"$here/streamline" matmul --m 1000 --n 1000 --k 1000 --alpha 0.5 --beta 2 --vs-cublas --check 2>&1 | tee -a "$out/matmul.txt" || status=1
"$here/streamline" matmul --m 8192 --n 8192 --k 8192 --vs-cublas --check --repeat 10 2>&1 | tee -a "$out/matmul.txt" || status=1

step "seed 003: augmentation of the synthetic image (PNGs and contact sheet)"
"$here/streamline" augment --synthetic --batch 16 --size 256 --seed 3 --out "$out/augment" 2>&1 | tee "$out/augment.txt" || status=1
"$here/streamline" augment --synthetic --batch 16 --size 256 --seed 3 --separate --out "$out/augment-separate" 2>&1 | tee -a "$out/augment.txt" || status=1

step "pipelines (seeds 000-004): serial vs overlapped, graph, trace and timeline"
for p in heavy-split branches prefetch multistage copy-overlap augment-train encoder-decoder; do
  "$here/streamline" pipeline $p --graph --trace "$out/pipeline-$p.json" --timeline "$out/pipeline-$p.svg" \
    2>&1 | tee -a "$out/pipelines.txt" || status=1
done
"$here/streamline" pipeline prefetch --depth 3 --batches 18 --trace "$out/pipeline-prefetch-depth3.json" \
  --timeline "$out/pipeline-prefetch-depth3.svg" 2>&1 | tee -a "$out/pipelines.txt" || status=1

step "pipelines under compute-sanitizer racecheck and synccheck (small sizes, eager and graph)"
small=(
  "branches --n 65536 --iterations 4"
  "prefetch --batch 65536 --batches 4 --compute-reps 2"
  "multistage --rows 128 --size 128 --batches 4"
  "copy-overlap --size 128 --matmuls 4 --copies 4"
  "augment-train --batches 8 --size 32 --hidden 64"
  "encoder-decoder --batches 8 --inputs 256 --features 128 --hidden 64 --steps 4"
)
for tool in racecheck synccheck; do
  for args in "${small[@]}"; do
    # shellcheck disable=SC2086
    compute-sanitizer --tool $tool --require-cuda-init no --error-exitcode 9 \
      "$here/streamline" pipeline $args --graph --reps 1 > "$out/sanitizer-pipeline.txt" 2>&1
    rc=$?
    echo "$tool pipeline ${args%% *}: rc $rc, $(grep -E "SUMMARY" "$out/sanitizer-pipeline.txt" | tail -1)"
    [ $rc -eq 0 ] || { tail -5 "$out/sanitizer-pipeline.txt"; status=1; }
  done
done

step "a kernel of one's own: color jitter (examples/color-jitter) in augment-train, timeline"
"$here/color-jitter" --graph --timeline "$out/color-jitter.svg" --trace "$out/color-jitter.json" \
  2>&1 | tee "$out/color-jitter.txt" || status=1
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool $tool --require-cuda-init no --error-exitcode 9 \
    "$here/color-jitter" --batches 8 --size 32 --steps 4 --reps 1 --graph > "$out/sanitizer-color-jitter.txt" 2>&1
  rc=$?
  echo "$tool color-jitter: rc $rc, $(grep -E "SUMMARY" "$out/sanitizer-color-jitter.txt" | tail -1)"
  [ $rc -eq 0 ] || { tail -5 "$out/sanitizer-color-jitter.txt"; status=1; }
done

step "SASS of the kernels (instruction counts)"
if command -v cuobjdump >/dev/null; then
  kernels=$(mktemp -d)
  if "$here/streamline" info --write-kernels "$kernels" > /dev/null; then
    cuobjdump -sass "$kernels/sm_90/gpu_kernels.cubin" > "$out/sass_sm_90.txt" && echo "wrote $out/sass_sm_90.txt"
  else
    echo "writing the embedded kernels failed: no SASS"; status=1
  fi
  rm -rf "$kernels"
fi

step "cold start: empty driver cache, then warm"
"$here/cold-start.sh" "${COLD_RUNS:-3}" 2>&1 | tee "$out/cold-start.txt" || status=1

step "bench"
"$here/streamline" bench --json "$out/streamline.jsonl" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.txt" || status=1
if [ -n "$anchors" ]; then
  step "peers: PyTorch and CV-CUDA (same machine, same run)"
  "$here/peers.sh" "$anchors" "$out" || status=1
fi
echo
[ $status -eq 0 ] && echo "gpu-check: all steps passed" || echo "gpu-check: FAILED"
exit $status
