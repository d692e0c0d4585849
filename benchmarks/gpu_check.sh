#!/usr/bin/env bash
# One-GPU check of stacked training, within 8 minutes: the CUDA tests, bench_stack.py (with the GP-bandit
# rounds of a K=64 stack through a worker pool), the trainers end to end (train vs train_many), the runner
# stacking a smoke sweep on CUDA, and a 20-epoch stacked run at paper scale (full MNIST, batch 1000).
# Needs only torch, botorch, gpytorch, pandas, seaborn, pytest, hypothesis and this repository.
#
# Data travel gzipped (the copy sent to the GPU machine must stay small):
#   benchmarks/gpu_check.sh prepare      # on a machine with $TVOLIB_DATA: writes benchmarks/gpu_data/MNIST/raw/*.gz
#   benchmarks/gpu_check.sh              # on the GPU machine: unpacks them to a temporary data root, runs the checks
# Results go to stdout and to $OUT (default ./gpu_check_out).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
GZ=benchmarks/gpu_data/MNIST/raw
FILES="train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte"

if [ "${1:-}" = "prepare" ]; then
  : "${TVOLIB_DATA:?set TVOLIB_DATA to the data root holding MNIST/raw}"
  mkdir -p "$GZ"
  for f in $FILES; do gzip -9 -c "$TVOLIB_DATA/MNIST/raw/$f" > "$GZ/$f.gz"; done
  ls -l "$GZ"; exit 0
fi

OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
if [ -d "$GZ" ]; then
  DATA=$(mktemp -d)
  mkdir -p "$DATA/MNIST/raw"
  for f in $FILES; do gunzip -c "$GZ/$f.gz" > "$DATA/MNIST/raw/$f"; done
  export TVOLIB_DATA="$DATA"
fi
export TVOLIB_CACHE=${TVOLIB_CACHE:-$(mktemp -d)}
status=0
$PY -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), torch.__version__)" || exit 1

echo "== CUDA tests (-k cuda) =="
timeout 120 $PY -m pytest tests -q -x -k cuda -p no:cacheprovider 2>&1 | tee "$OUT/tests.txt"
rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || [ "$rc" = 5 ] || status=1   # 5: no test selected

echo "== bench_stack.py: fp32 =="
timeout 200 $PY benchmarks/bench_stack.py --device cuda --K 1 8 32 128 --S 10 50 --steps 8 2>&1 | tee "$OUT/bench_fp32.txt"
echo "== bench_stack.py: TF32 + bf16 autocast =="
timeout 100 $PY benchmarks/bench_stack.py --device cuda --K 1 32 128 --S 10 50 --steps 8 --tf32 --bf16 2>&1 | tee "$OUT/bench_tf32_bf16.txt"

echo "== GP-bandit rounds of a K=64 stack through a 16-worker StepPool (d=15) =="
timeout 150 $PY benchmarks/bench_stack.py --device cuda --K 1 --S 10 50 --steps 4 --bandit-K 64 --bandit-N 40 200 \
  --workers 16 --host-cores 16 2>&1 | tee "$OUT/bench_bandits.txt"

echo "== train and train_many end to end (fp32 eager), K = 8 and 32, S = 10 and 50 =="
timeout 120 $PY benchmarks/bench_stack.py --device cuda --K 1 --S 10 50 --steps 4 --trainers 8 32 --trainer-epochs 3 \
  2>&1 | tee "$OUT/bench_trainers.txt"

echo "== the runner on CUDA: the gpu profile's plan, then a smoke sweep (two GP-bandit runs) stacked automatically =="
timeout 30 $PY -m tvolib run all --profile gpu --dry-run 2>&1 | sed -n 1,3p | cut -c1-400 | tee "$OUT/plan_gpu.txt"
timeout 90 $PY -m tvolib run table_permutation --profile smoke --results-root "$(mktemp -d)" 2>&1 | tail -3 | tee "$OUT/runner_stacked.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

echo "== 20-epoch stacked run (train_many): 8 runs at paper scale (full MNIST, batch 1000), one alone =="
timeout 120 $PY - <<'PYEOF' 2>&1 | tee "$OUT/train_many.txt"
import tempfile, time
from pathlib import Path
from tvolib.training.images import RunConfig, train
from tvolib.training.many import train_many
base = RunConfig(model="vae", dataset="mnist", objective="tvo", d=5, S=10, epochs=20, n_test=2000)
configs = [base.replace(schedule=s, seed=seed) for s in ("log", "linear") for seed in range(1, 5)]
root = Path(tempfile.mkdtemp())
t0 = time.perf_counter()
results = train_many(configs, [root / str(i) for i in range(len(configs))], device="cuda")
seconds = time.perf_counter() - t0
for c, r in zip(configs, results):
    print(c.schedule, c.seed, round(r.final["test_log_px"], 2), r.final["completed"], round(r.final["train_seconds"], 1))
print(f"train_many: {len(configs)} runs x 20 epochs in {seconds:.1f} s (IWAE-5000 on 2000 test points at 0 and 20)")
t0 = time.perf_counter()
alone = train(configs[0], root / "alone", device="cuda")
print(f"train: 1 run x 20 epochs in {time.perf_counter() - t0:.1f} s; test log p(x) {alone.final['test_log_px']:.2f} "
      f"(in the stack: {results[0].final['test_log_px']:.2f})")
PYEOF
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
