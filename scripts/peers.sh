#!/usr/bin/env bash
# The peers of `streamline bench`, timed on the same GPU in the same run: PyTorch/torchvision
# (ANCHORS_DIR/torch_anchors.py) and, where ANCHORS_DIR/cvcuda/cvcuda-sm90.tar.xz is present and
# the GPU is sm_90, CV-CUDA (ANCHORS_DIR/cvcuda/cvcuda_anchors.py, NHWC). Pairs each with our
# rows of RESULTS_DIR/streamline.jsonl through compare.py, and CV-CUDA also with our NHWC rows
# (every single operation and the augmentation).
# With CV-CUDA it also runs cvcuda_rotate_geometry.py (next to this script) and pairs our
# rotations with CV-CUDA's about the image centre, and cvcuda_fresh_inputs.py (also next to it),
# which times CV-CUDA with fresh inputs as `streamline bench` times ours, and pairs those.
#
#   ./peers.sh ANCHORS_DIR RESULTS_DIR
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
anchors=$1
out=$2
status=0
# Pair only our own rows (the bench also records cuBLAS and our separate chain beside ours).
grep '"impl":"streamline"' "$out/streamline.jsonl" > "$out/ours.jsonl"

echo "=== PyTorch anchors (same machine, same run)"
python3 "$anchors/torch_anchors.py" > "$out/torch.jsonl" 2> "$out/torch.err" || { tail -5 "$out/torch.err"; status=1; }
python3 "$anchors/compare.py" "$out/ours.jsonl" "$out/torch.jsonl" | tee "$out/compare.txt"

if [ -f "$anchors/cvcuda/cvcuda-sm90.tar.xz" ]; then
  echo
  echo "=== CV-CUDA anchors (same machine, same run; NHWC)"
  cv=$(mktemp -d)
  tar xJf "$anchors/cvcuda/cvcuda-sm90.tar.xz" -C "$cv"
  PYTHONPATH="$cv${PYTHONPATH:+:$PYTHONPATH}" python3 "$anchors/cvcuda/cvcuda_anchors.py" \
    > "$out/cvcuda.jsonl" 2> "$out/cvcuda.err" || { tail -5 "$out/cvcuda.err"; status=1; }
  python3 "$anchors/compare.py" "$out/ours.jsonl" "$out/cvcuda.jsonl" | tee "$out/compare-cvcuda.txt"
  # Our rows in CV-CUDA's own layout: NHWC in and out, and for the crop NHWC into NCHW as
  # CV-CUDA's crop_flip_normalize_reformat writes.
  echo
  echo "=== Ours in NHWC against CV-CUDA (NHWC)"
  { grep '"impl":"streamline-nhwc"' "$out/streamline.jsonl" | grep -v '"case":"roi_align'
    grep '"impl":"streamline-nhwc-to-nchw"' "$out/streamline.jsonl" | grep '"case":"roi_align'
  } > "$out/ours-nhwc.jsonl"
  python3 "$anchors/compare.py" "$out/ours-nhwc.jsonl" "$out/cvcuda.jsonl" | tee "$out/compare-cvcuda-nhwc.txt"
  # cvcuda_anchors.py's rotation shift does not keep the image centre in place, so CV-CUDA reads
  # and writes under half of the image there; this pairs ours with its rotation about the centre.
  echo
  echo "=== CV-CUDA's rotation about the image centre (cvcuda_rotate_geometry.py)"
  PYTHONPATH="$cv${PYTHONPATH:+:$PYTHONPATH}" python3 "$here/cvcuda_rotate_geometry.py" \
    > "$out/cvcuda-rotate.jsonl" 2> "$out/cvcuda-rotate.err" || { tail -5 "$out/cvcuda-rotate.err"; status=1; }
  grep '"geometry"' "$out/cvcuda-rotate.jsonl"
  grep '"impl": "cvcuda-centred"' "$out/cvcuda-rotate.jsonl" > "$out/cvcuda-centred.jsonl"
  python3 "$anchors/compare.py" "$out/ours.jsonl" "$out/cvcuda-centred.jsonl" | grep -E "^case|^rotate_" \
    | tee "$out/compare-cvcuda-centred.txt"
  # cvcuda_anchors.py passes the same buffers to every call, which stay in L2 at small batches;
  # this times CV-CUDA on buffers rotated past 4x L2, as ours are.
  echo
  echo "=== CV-CUDA with fresh inputs (cvcuda_fresh_inputs.py)"
  PYTHONPATH="$cv${PYTHONPATH:+:$PYTHONPATH}" python3 "$here/cvcuda_fresh_inputs.py" \
    > "$out/cvcuda-fresh.jsonl" 2> "$out/cvcuda-fresh.err" || { tail -5 "$out/cvcuda-fresh.err"; status=1; }
  python3 "$anchors/compare.py" "$out/ours.jsonl" "$out/cvcuda-fresh.jsonl" | tee "$out/compare-cvcuda-fresh.txt"
  rm -rf "$cv"
fi
exit $status
