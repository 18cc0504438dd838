#!/bin/bash
# The same command writes the same bytes: run kosumi's writers from one source tree and list the
# SHA-256 of every file they write; run it for two trees (before and after a change) and diff.
#
#   bash benchmarks/same_bytes.sh SRC OUT CALIB LABELS
#
# SRC: a folder holding kosumi/ (src, or a frozen copy of it); OUT: where the files go (emptied
# of earlier outputs); CALIB: a positions folder; LABELS: a small label folder (make demo's
# runs/demo/labels). KataGo's g170 net is read from ../shared/models when it is there.
# benchmarks/RESULTS.md, "Reproducibility", has the figures.
set -euo pipefail
SRC=$(realpath "$1"); OUT=$2; CAL=$(realpath "$3"); LAB=$(realpath "$4")
PY=${PYTHON:-$PWD/.venv/bin/python}  # not realpath: the venv is a symlink to python
G=$(realpath ../shared/models/g170-b6c96-s175395328-d26788732.bin.gz 2>/dev/null || true)
mkdir -p "$OUT"; cd "$OUT"
export PYTHONHASHSEED=1 PYTHONPATH=$SRC OMP_NUM_THREADS=1
k() { local log=$1; shift; "$PY" -m kosumi "$@" > "$log.log" 2>&1; }
rm -f ./*.safetensors ./*.kpk ./*.onnx ./*.qat-state ./*.jsonl ./*.png
Q="--bits 8 --calib $CAL --calib-size 64"
k init init --arch b2c16 --features basic --head conv --out net.safetensors --seed 1
k ptq quantize net.safetensors $Q --out ptq.safetensors
k qat quantize net.safetensors $Q --qat --data "$CAL" --steps 20 --out qat.safetensors
k qatr1 quantize net.safetensors $Q --qat --data "$CAL" --steps 20 --stop-after 12 \
  --out qatr.safetensors
k qatr2 quantize net.safetensors $Q --qat --data "$CAL" --steps 20 --resume --out qatr.safetensors
k qatt quantize net.safetensors --bits 8 --calib "$LAB" --calib-size 64 --qat --data "$LAB" \
  --qat-target teacher --steps 10 --qat-scales fixed --out qatt.safetensors
k exp1 export qat.safetensors --format pack --out qat.kpk
k dz quantize default --bits 8 --calib "$CAL" --calib-size 128 --zero 2 --out dz.safetensors
k dg quantize default --bits 8 --calib "$CAL" --calib-size 128 --rounding gptq --keep-float none \
  --out dg.safetensors
k d16 quantize default --bits 16 --out d16.safetensors
k exp2 export dz.safetensors --format onnx --out dz.onnx
k exp3 export dz.safetensors --format pack --out dz.kpk
k exp4 export default --format onnx --out d.onnx
if [ -n "$G" ]; then
  k g quantize "$G" --bits 8 --calib "$CAL" --calib-size 32 --quantize-outputs on \
    --out g.safetensors
fi
D="--data $LAB --student b2c16 --steps 30 --batch 64 --eval-every 10 --out st.safetensors"
k dist1 distill $D --stop-after 20
k dist2 distill $D --resume
sha256sum ./*.safetensors ./*.kpk ./*.onnx | grep -v "state.safetensors" | tee sums.txt
