#!/usr/bin/env bash
# Record the raw logs behind fixtures/compare-family/ on one H100 (run on the GPU machine, from the
# repository root). Needs the megatron-core 0.19.0 wheel in .whl/ and torch 2.11 in `python3`.
#
#   here:   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#             --implementation cp --platform manylinux_2_28_x86_64 -d .whl megatron-core==0.19.0
#   device: bash tools/record_compare_family.sh "$OUT"        (carry .whl)
#   here:   python3 tools/finish_compare_family.py <folder with the raw logs>
#
# Writes OUTDIR/{baseline,opt025,opt050,opt100}.raw.log and OUTDIR/meta.txt.
set -u -o pipefail
OUTDIR=${1:?usage: record_compare_family.sh OUTDIR}
ITERS=${ITERS:-30}

source tools/megatron_wheel_setup.sh || exit 1

{
  echo "repo_root=$PWD"
  echo "site=$SITE"
  echo "date=$(date -u +%FT%TZ)"
  echo "python=$(python3 -c 'import sys; print(sys.version.split()[0], sys.executable)')"
  echo "torch=$(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)')"
  echo "megatron_core=$(python3 -c 'import megatron.core.package_info as p; print(p.__version__)' 2>/dev/null)"
  echo "gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
  echo "cpu=$(lscpu | sed -n 's/^Model name: *//p') x $(nproc)"
  echo "mem=$(free -g | awk '/Mem:/{print $2" GiB"}')"
  echo "kernel=$(uname -r)"
} > "$OUTDIR/meta.txt"

COMMON="--num-layers 8 --hidden-size 2048 --num-attention-heads 16 --seq-length 1024
 --max-position-embeddings 1024 --micro-batch-size 4 --global-batch-size 32 --train-iters $ITERS
 --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --bf16 --use-distributed-optimizer
 --transformer-impl local --mock-data --tokenizer-type NullTokenizer --vocab-size 32000
 --log-interval 1 --log-throughput --log-memory-interval 1 --eval-iters 0 --eval-interval 100000
 --split 100,0,0 --no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion
 --no-gradient-accumulation-fusion --no-persist-layer-norm"
OFFLOAD="--optimizer-cpu-offload --use-precision-aware-optimizer --optimizer-offload-fraction"

run() {  # name, extra args...
  local name=$1; shift
  local cmd="python3 -m torch.distributed.run --nproc-per-node 1 tools/compare_family_pretrain_gpt.py $(echo $COMMON) $*"
  echo "cmd_$name=$cmd" >> "$OUTDIR/meta.txt"
  local t0=$SECONDS
  timeout 240 $cmd > "$OUTDIR/$name.raw.log" 2>&1
  local rc=$?
  echo "rc_$name=$rc wall_s_$name=$((SECONDS - t0))" >> "$OUTDIR/meta.txt"
  grep -c "iteration *$ITERS/" "$OUTDIR/$name.raw.log" >/dev/null || { tail -40 "$OUTDIR/$name.raw.log"; return 1; }
}

run baseline || exit 2
run opt025 $OFFLOAD 0.25 || exit 3
run opt050 $OFFLOAD 0.5 || exit 4
run opt100 $OFFLOAD 1.0 || exit 5
cat "$OUTDIR/meta.txt"
