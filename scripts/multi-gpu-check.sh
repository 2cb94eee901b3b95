#!/usr/bin/env bash
# Runs on a machine with two or more GPUs (and PyTorch) from the folder made by `cargo xtask
# bundle`: the multi-GPU tests and their compute-sanitizer runs; collectives through the engine
# beside torch.distributed's NCCL collectives (one process driving every GPU, and one process
# per GPU); a rank killed in the middle of a run; seed 003 data-parallel on N GPUs against one
# GPU (f32 gradients, and bf16 in 4 buckets); seed 003's encoder-decoder split over two GPUs
# against one; and seed 003's PyTorch loop under torchrun with DistributedDataParallel,
# torchvision's transforms against Streamline's.
#
#   ./multi-gpu-check.sh [GPUS] [RESULTS_DIR]        (default: every GPU, ./results-multi)
#
# OPS (default: all-reduce all-gather reduce-scatter) picks the collectives timed; DDP=0 skips
# the PyTorch loop; SANITIZER_CASES sets the property cases under the sanitizers (default 2).
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
gpus=${1:-$(nvidia-smi -L | wc -l)}
out=${2:-$here/results-multi}
mkdir -p "$out"
# NVLink SHARP (multicast) stays off, for this script and every process it starts.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
status=0
step() { echo; echo "=== $*"; }

step "devices"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$out/nvidia-smi.txt"
nvidia-smi topo -m | head -$((gpus + 1))

step "multi-GPU tests"
timeout 300 "$here/tests/test-suite" multi --test-threads=1 2>&1 | tee "$out/tests-multi.txt" \
  | grep -E "^test |test result|panicked|skipping"
grep -q "test result: ok" "$out/tests-multi.txt" || status=1

site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$here"/python/*.whl || exit 1
export PYTHONPATH="$site" PYTHONUNBUFFERED=1

compare() {  # OURS.jsonl PEER.jsonl
  python3 - "$1" "$2" <<'PY'
import json, sys
ours = {d["bytes"]: d for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith("{")))}
peer = {d["bytes"]: d for d in map(json.loads, (l for l in open(sys.argv[2]) if l.startswith("{")))}
print(f"{'bytes':>12} {'ours µs':>10} {'peer µs':>10} {'ours busbw':>11} {'peer busbw':>11} {'busbw ratio':>12} {'latency ratio':>14}")
for b in sorted(ours):
    if b in peer:
        o, p = ours[b], peer[b]
        print(f"{b:>12} {o['us']:>10.1f} {p['us']:>10.1f} {o['busbw_gbs']:>11.2f} {p['busbw_gbs']:>11.2f} "
              f"{o['busbw_gbs'] / p['busbw_gbs']:>12.3f} {o['us'] / p['us']:>14.3f}")
PY
}

for op in ${OPS:-all-reduce all-gather reduce-scatter}; do
  step "$op on $gpus GPUs: the engine (one process) beside torch.distributed (one process per GPU)"
  timeout 300 "$here/streamline" collective --gpus "$gpus" --op $op --check --json 2>&1 | tee "$out/$op-streamline.txt" \
    | grep -v "^{" || status=1
  timeout 300 torchrun --nproc_per_node "$gpus" "$here/python/examples/collective_torch.py" --op ${op//-/_} \
    > "$out/$op-torch.txt" 2>&1 || { status=1; tail -5 "$out/$op-torch.txt"; }
  compare "$out/$op-streamline.txt" "$out/$op-torch.txt" | tee "$out/$op-compare.txt"
done

step "all-reduce, one process per GPU (the engine's rendezvous over TCP)"
for r in $(seq 1 $((gpus - 1))); do
  timeout 300 "$here/streamline" collective --world-size "$gpus" --rank $r --rendezvous tcp://127.0.0.1:29611 \
    --check > "$out/rank$r.txt" 2>&1 &
done
timeout 300 "$here/streamline" collective --world-size "$gpus" --rank 0 --rendezvous tcp://127.0.0.1:29611 \
  --check --json 2>&1 | tee "$out/all-reduce-processes.txt" | grep -v "^{" || status=1
wait
compare "$out/all-reduce-processes.txt" "$out/all-reduce-torch.txt"

step "a rank killed in the middle of a run: the others stop with an error within their timeout"
"$here/streamline" collective --world-size 2 --rank 1 --rendezvous tcp://127.0.0.1:29612 --bytes 256M \
  --iters 20 --repeat 10000 --timeout 10 > /dev/null 2>&1 &
victim=$!
(sleep 8; kill -9 $victim) &
t0=$SECONDS
timeout 120 "$here/streamline" collective --world-size 2 --rank 0 --rendezvous tcp://127.0.0.1:29612 --bytes 256M \
  --iters 20 --repeat 10000 --timeout 10 > "$out/killed.txt" 2>&1
rc=$?
wait
echo "rank 0: exit $rc after $((SECONDS - t0)) s (rank 1 killed at 8 s): $(tail -1 "$out/killed.txt")"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "rank 0 did not stop with an error"; status=1; }

: > "$out/augment-train-dp.txt"
for grad in "--grad-dtype f32" "--grad-dtype bf16 --buckets 4"; do
  step "seed 003 data-parallel on $gpus GPUs against one GPU (augment-train --gpus $gpus $grad)"
  # shellcheck disable=SC2086
  timeout 400 "$here/streamline" pipeline augment-train --gpus "$gpus" --batches ${DP_BATCHES:-128} \
    --steps ${DP_STEPS:-32} $grad 2>&1 | tee -a "$out/augment-train-dp.txt" || status=1
done

step "seed 003 encoder-decoder: the encoder on one GPU, the decoder on another, against one GPU"
# shellcheck disable=SC2086
timeout 400 "$here/streamline" pipeline encoder-decoder --gpus 2 ${ED_ARGS:---batches 256,1024,4096} \
  2>&1 | tee "$out/encoder-decoder-2.txt" || status=1

if [ "${DDP:-1}" = 1 ]; then
  step "seed 003's PyTorch loop under torchrun with DDP: torchvision's transforms against Streamline's"
  timeout 400 torchrun --nproc_per_node "$gpus" "$here/python/examples/seed003_ddp.py" ${DDP_BATCH:-128} 2>&1 \
    | grep -E "^\{|Error|error" | tee "$out/seed003-ddp.jsonl" || status=1
  grep -q speedup_vs_torchvision_ddp "$out/seed003-ddp.jsonl" || status=1
fi

for tool in memcheck racecheck synccheck; do
  step "compute-sanitizer $tool (multi-GPU tests but the faults' timeouts and the green context; NCCL's own handled API errors not reported)"
  PROPTEST_CASES=${SANITIZER_CASES:-2} SANITIZER=1 timeout 400 compute-sanitizer --tool $tool \
    --report-api-errors no --error-exitcode 9 "$here/tests/test-suite" multi::collectives::collectives \
    multi::collectives::ranks multi::collectives::buffers multi::between_devices multi::scenarios \
    --test-threads=1 \
    > "$out/sanitizer-multi-$tool.txt" 2>&1
  rc=$?
  grep -E "SUMMARY|test result" "$out/sanitizer-multi-$tool.txt" | sort | uniq -c
  [ $rc -eq 0 ] || { echo "compute-sanitizer $tool: FAILED (rc $rc)"; status=1; }
done

echo
[ $status -eq 0 ] && echo "multi-gpu-check: all steps passed" || echo "multi-gpu-check: FAILED (see above)"
exit $status
