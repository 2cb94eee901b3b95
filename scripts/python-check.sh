#!/usr/bin/env bash
# Runs on a GPU machine (with PyTorch and torchvision) from the folder made by `cargo xtask
# bundle`: installs the Python wheel into a private folder, runs its pytest suite (CPU and GPU
# tests), the host-overhead measurement, seed 003's training loop with torchvision's and
# Streamline's augmentation (with the anchors folder given, also the seed's own PyTorch script
# in the same run), then compute-sanitizer memcheck, racecheck and synccheck over a small GPU test
# run and over the CUDA graph tests.
#
#   ./python-check.sh [ANCHORS_DIR] [RESULTS_DIR]
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
anchors=${1:-}
out=${2:-$here/results-python}
mkdir -p "$out"
status=0
step() { echo; echo "=== $*"; }

site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$here"/python/*.whl || exit 1
# Python sources beside the wheel (python/streamline-src/*.py) replace the wheel's copies.
[ -d "$here/python/streamline-src" ] && cp "$here"/python/streamline-src/*.py "$site/streamline/"
export PYTHONPATH="$site" PYTHONUNBUFFERED=1
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
export STREAMLINE_SAXPY_PTX="$here/python/saxpy/sm_$cc/saxpy_kernels.ptx"
[ -f "$STREAMLINE_SAXPY_PTX" ] || export STREAMLINE_SAXPY_PTX="$here/python/saxpy/sm_90/saxpy_kernels.ptx"
export STREAMLINE_DOCS_PTX="$here/python/docs-kernel/sm_$cc/my_op_kernels.ptx"
[ -f "$STREAMLINE_DOCS_PTX" ] || export STREAMLINE_DOCS_PTX="$here/python/docs-kernel/sm_90/my_op_kernels.ptx"
cd "$here"

step "pytest (CPU and GPU tests)"
python3 -m pytest -q -p no:cacheprovider python/tests 2>&1 | tee "$out/pytest.txt" | tail -25
grep -qE "passed" "$out/pytest.txt" && ! grep -qE "[0-9]+ (failed|error)" "$out/pytest.txt" || status=1

step "host time of a Python call over the Rust call"
python3 python/examples/host_overhead.py 2>&1 | tee "$out/host-overhead.jsonl" || status=1

step "roi_align forward and backward against torchvision"
python3 python/examples/roi_align_bench.py 2>&1 | tee "$out/roi-align.jsonl" || status=1

step "seed 003's training loop: torchvision vs Streamline augmentation, serial and pipelined"
python3 python/examples/seed003_train.py ${SEED003_BATCHES:-8 32 64 128} 2>&1 | tee "$out/seed003.jsonl" || status=1
if [ -n "$anchors" ] && [ -f "$anchors/seed003_train.py" ]; then
  step "the seed's own script (reference), same GPU, same run"
  python3 "$anchors/seed003_train.py" ${SEED003_ANCHOR_BATCHES:-32} 2>&1 | tee "$out/seed003-anchor.jsonl" || status=1
fi

sanitize() {  # TOOL NAME [ENV...] -- PYTEST ARGS...
  local tool=$1 name=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
    python3 -m pytest -q -p no:cacheprovider "$@" > "$out/sanitizer-$name.txt" 2>&1
  local rc=$?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$out/sanitizer-$name.txt" | tail -3
  [ $rc -eq 0 ] || { echo "compute-sanitizer $name: FAILED (rc $rc)"; grep -E "Invalid|Race|hazard|in kernel|^=+ +at" "$out/sanitizer-$name.txt" | head -20; status=1; }
}
for tool in memcheck racecheck synccheck; do
  step "compute-sanitizer $tool (small GPU tests; torch's caching allocator off)"
  sanitize $tool $tool SL_TEST_SMALL=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 -- \
    python/tests/test_gpu.py -k "not stream and not schedules"
  step "compute-sanitizer $tool (captured and replayed in CUDA graphs)"
  sanitize $tool graphs-$tool SL_TEST_SMALL=1 -- python/tests/test_graphs.py
  step "compute-sanitizer $tool (JPEG decoding and ragged batches)"
  sanitize $tool jpeg-$tool PYTORCH_NO_CUDA_MEMORY_CACHING=1 -- python/tests/test_jpeg.py
done

[ $status -eq 0 ] && echo "python-check: all passed" || echo "python-check: FAILED"
exit $status
