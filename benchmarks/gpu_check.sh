#!/usr/bin/env bash
# One-GPU check of stacked training, in about 7 minutes on an H100 (its timeouts add up to 10): the CUDA
# tests (stacked numerics, no host syncs in the minibatch loop, precision scopes, one-pass stacked
# evaluation), bench_stack.py in fp32 / tf32 / bf16 / bf16 + torch.compile at K = 1, 32, 128 and
# S = 10, 50 (each row beside the cost model's prediction) with the stacked evaluation's rate, the
# chunked IWAE-5000 evaluation against one point at a time (bench_evaluate.py), the
# precision check at the reference configuration (bench_precision.py: 6k/1k MNIST, batch 1000, S = 10,
# d = 5, log schedule, 3 seeds, 200 epochs, IWAE-5000), and the Fig 4 slice of the gpu profile through
# the runner (25 runs, one stack; 40 of its 100 epochs) beside the cost model's estimate.
# Needs torch, botorch, gpytorch, pandas, seaborn, pytest, hypothesis, submitit and this repository; where
# submitit is missing, the wheel that `prepare` saved is installed into a temporary folder.
#
# Data travel compressed (the copy sent to the GPU machine must stay small):
#   benchmarks/gpu_check.sh prepare      # on a machine with $TVOLIB_DATA and pip: writes benchmarks/gpu_data/
#                                        # (every dataset the CUDA tests read, the idx files gzipped, about
#                                        # 50 MB) and the submitit wheel to benchmarks/gpu_data/wheels/
#   benchmarks/gpu_check.sh              # on the GPU machine: unpacks them to a temporary data root, runs the checks
#   benchmarks/gpu_check.sh extra        # the earlier checks (bandit pool, trainers end to end, runner smoke sweep)
#   benchmarks/gpu_check.sh single       # the single-run checks: every CUDA test, bench_evaluate.py (IWAE-5000
#                                        # chunked vs one point at a time), bench_train.py (trainer vs floor);
#                                        # about 3 minutes
#   benchmarks/gpu_check.sh bandit       # the bandit at the gpu profile: the Fig 4 slice (MNIST, d = 5, S = 10,
#                                        # 5 seeds, 100 epochs, 4 schedules) through the runner, with the arms
#                                        # the bandit chose (share of degenerate GP arms); about 3 minutes
#   benchmarks/gpu_check.sh adaptive     # the Fig 13 slice at the gpu profile (MNIST, S = 10, 5 seeds, 100
#                                        # epochs): the adaptive-d bandit, then log, moments and tvolib's
#                                        # bandit at d = 10, 2, 15, one group at a time; under 10 minutes.
#                                        # --dataset fashion_mnist: Fashion-MNIST, d = 5 first among the
#                                        # fixed groups; --fixed-only: no adaptive group; --d 2,15: only
#                                        # these fixed d; --tests: the
#                                        # CUDA tests first (about a minute)
#   benchmarks/gpu_check.sh budget       # the paper's own budget: Fig 11 at the gpu profile (full MNIST, T = 1000
#                                        # epochs, d = 5, S = 10, w = 10), every series of sweeps.BUDGET_SERIES,
#                                        # 3 seeds, one stack, bf16 + torch.compile, through the runner
#                                        # (benchmarks/gpu_budget.py; a labelled variant, precision="bf16": the
#                                        # sweep's fp32 digests are unchanged). All of it (21 runs, about 12
#                                        # minutes by the estimate) does not fit one command: --part 1/2 and
#                                        # --part 2/2, one per GPU session (about 7-8 and 7 minutes, 5-12 at
#                                        # the estimate's extremes; the plan printed first gives it), or
#                                        # --series a,b. It trains until
#                                        # done or --deadline S (default 520 s), then reports: test log p(x)
#                                        # mean ± s.e. per series at the last and intermediate epochs, the GP's
#                                        # rounds and degenerate shares, markdown and CSVs into $OUT. Runs live
#                                        # in results/gpu_budget (kept on a warm machine): the same command again
#                                        # resumes them from their checkpoints. --smoke: the same path on the CPU
#                                        # at a toy scale, in about a minute (no GPU needed). Data: `prepare
#                                        # budget` packs MNIST alone (about 12 MB) and the submitit wheel.
# Results go to stdout and to $OUT (default ./gpu_check_out).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python || command -v python3)}
PACKED=benchmarks/gpu_data
FILES="train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte"
# The CUDA tests' data fixture needs every dataset folder (tests/conftest.py); the idx files are gzipped,
# the others are compressed already.
IDX_SETS="MNIST FashionMNIST"
PLAIN_SETS="binarized_mnist omniglot"

if [ "${1:-}" = "prepare" ]; then
  : "${TVOLIB_DATA:?set TVOLIB_DATA to the data root holding MNIST/, FashionMNIST/, binarized_mnist/, omniglot/}"
  if [ "${2:-}" = "budget" ]; then IDX_SETS="MNIST"; PLAIN_SETS=""; fi   # the budget reads MNIST alone
  rm -rf "$PACKED"   # this script's own output: a fresh pack, nothing left from another variant
  for set in $IDX_SETS; do
    mkdir -p "$PACKED/$set/raw"
    for f in $FILES; do gzip -9 -c "$TVOLIB_DATA/$set/raw/$f" > "$PACKED/$set/raw/$f.gz"; done
  done
  for set in $PLAIN_SETS; do mkdir -p "$PACKED/$set" && cp "$TVOLIB_DATA/$set"/* "$PACKED/$set/"; done
  version=$($PY -c "from importlib.metadata import version; print(version('submitit'))") || exit 1
  $PY -m pip download -q --no-deps --only-binary=:all: -d "$PACKED/wheels" "submitit==$version" || exit 1
  du -sh "$PACKED"; exit 0
fi

OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! $PY -c "import submitit" 2>/dev/null && ls "$PACKED"/wheels/submitit-*.whl >/dev/null 2>&1; then
  SITE=$(mktemp -d)
  $PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$PACKED"/wheels/submitit-*.whl || exit 1
  export PYTHONPATH="$SITE:$PYTHONPATH"
fi
if [ -d "$PACKED/MNIST" ]; then
  DATA=$(mktemp -d)
  for set in $IDX_SETS; do   # the sets that were packed (`prepare budget` packs MNIST alone)
    [ -d "$PACKED/$set" ] || continue
    mkdir -p "$DATA/$set/raw"
    for f in $FILES; do gunzip -c "$PACKED/$set/raw/$f.gz" > "$DATA/$set/raw/$f"; done
  done
  for set in $PLAIN_SETS; do [ -d "$PACKED/$set" ] && cp -r "$PACKED/$set" "$DATA/$set"; done
  export TVOLIB_DATA="$DATA"
fi
export TVOLIB_CACHE=${TVOLIB_CACHE:-$(mktemp -d)}
status=0

if [ "${1:-}" = "budget" ]; then
  shift
  given="$*"; deadline=520; smoke=""; args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --deadline) deadline="$2"; shift 2 ;;
      --smoke) smoke=1; args+=("$1"); shift ;;
      *) args+=("$1"); shift ;;
    esac
  done
  if [ -n "$smoke" ]; then
    # The CPU path at a toy scale, into a scratch results root (never the repository's results/).
    root=$(mktemp -d); args+=(--root "$root")
  else
    $PY -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), torch.__version__)" || exit 1
    # Kept between commands on a warm machine (ignored folders): the runs and Inductor's compiled kernels.
    export TORCHINDUCTOR_CACHE_DIR="$PWD/.cache/torchinductor"
  fi
  echo "== bandit budget: the plan =="
  $PY benchmarks/gpu_budget.py plan "${args[@]}" 2>&1 | tee "$OUT/budget_plan.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || exit 1
  echo "== bandit budget: training until done or ${deadline} s (the same command again resumes) =="
  start=$(date +%s)
  PYTHONUNBUFFERED=1 timeout -s TERM -k 20 "$deadline" $PY benchmarks/gpu_budget.py train "${args[@]}" 2>&1 \
    | tee "$OUT/budget_train.txt" | grep -v -E "it/s\]|s/it\]"
  rc=${PIPESTATUS[0]}
  echo "== training stopped after $(( $(date +%s) - start )) s with status $rc (124 or 137: the deadline) =="
  echo "== bandit budget: the report (markdown and CSVs in $OUT) =="
  $PY benchmarks/gpu_budget.py report "${args[@]}" --out "$OUT"
  rc_report=$?
  if [ "$rc_report" = 3 ] && [ -n "$smoke" ]; then
    echo "== not complete (smoke: every call starts from a fresh scratch root) =="
  elif [ "$rc_report" = 3 ]; then
    echo "== not complete: run 'benchmarks/gpu_check.sh budget $given' again on the same warm machine to resume =="
  elif [ "$rc_report" != 0 ] || { [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]; }; then
    status=1
  fi
  exit $status
fi
$PY -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), torch.__version__)" || exit 1
BENCH="$PY benchmarks/bench_stack.py --device cuda --S 10 50 --steps 8"

if [ "${1:-}" = "extra" ]; then
  echo "== GP-bandit rounds of a K=64 stack through a 16-worker StepPool (d=15) =="
  timeout 150 $PY benchmarks/bench_stack.py --device cuda --K 1 --S 10 50 --steps 4 --bandit-K 64 --bandit-N 40 200 \
    --workers 16 --host-cores 16 2>&1 | tee "$OUT/bench_bandits.txt"
  echo "== train and train_many end to end, K = 8 and 32, S = 10 and 50: fp32, then bf16 =="
  for p in fp32 bf16; do
    timeout 120 $PY benchmarks/bench_stack.py --device cuda --K 1 --S 10 50 --steps 4 --trainers 8 32 \
      --trainer-epochs 3 --precision $p 2>&1 | tee "$OUT/bench_trainers_$p.txt"
  done
  echo "== the runner on CUDA: the gpu profile's plan, then a smoke sweep stacked automatically =="
  timeout 30 $PY -m tvolib run all --profile gpu --dry-run 2>&1 | sed -n 1,3p | cut -c1-400 | tee "$OUT/plan_gpu.txt"
  timeout 90 $PY -m tvolib run table_permutation --profile smoke --results-root "$(mktemp -d)" 2>&1 | tail -3 \
    | tee "$OUT/runner_stacked.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  exit $status
fi

if [ "${1:-}" = "single" ]; then
  echo "== CUDA tests (-k cuda), all of them: the single-run trainer's sync-free loop and the dataset on CUDA too =="
  timeout 120 $PY -m pytest tests -q -k cuda -p no:cacheprovider -rfEs 2>&1 | tee "$OUT/tests_all.txt"
  rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || status=1
  echo "== bench_evaluate.py: IWAE-5000 one point at a time vs chunked (the speed-up target is >= 20x on a GPU) =="
  timeout 60 $PY benchmarks/bench_evaluate.py --device cuda --points 200 2>&1 | tee "$OUT/bench_evaluate.txt"
  echo "== bench_train.py: the single-run trainer against the bare floor (target <= 1.25) =="
  timeout 90 $PY benchmarks/bench_train.py --device cuda --epochs 4 --repeats 2 --skip-sizing 2>&1 | tee "$OUT/bench_train.txt"
  exit $status
fi

if [ "${1:-}" = "bandit" ]; then
  echo "== Fig 4 slice of the gpu profile through the runner (MNIST, d = 5, S = 10, 5 seeds, 100 epochs) =="
  # A file, not stdin: the bandit's worker processes (spawn) import the main script.
  cat > "$OUT/fig4_slice_bandit.py" <<'PYEOF'
import tempfile, time
from tvolib import runs
from tvolib.paper.bandit_analysis import arm_summary
from tvolib.paper.results import collect_schedule_histories
from tvolib.paper.sweeps import fig4_vae_mnist_fashion, protocol_method
if __name__ == "__main__":
    configs = [c for c in fig4_vae_mnist_fashion("gpu") if c.dataset == "mnist" and c.S == 10 and c.d == 5]
    root = tempfile.mkdtemp()
    t0 = time.perf_counter()
    frame = runs.run_configs(configs, results_root=root, device="cuda", progress=False)
    print(f"{len(configs)} runs in {time.perf_counter() - t0:.1f} s")
    assert list(frame["schedule"]) == [c.schedule for c in configs], "rows not in config order"
    frame["method"] = [protocol_method(c) for c in configs]  # the two bandits: the code's protocol and tvolib's
    print(frame.groupby("method")[["test_log_px", "test_kl"]].agg(["mean", "sem", "count"]).round(2).to_string())
    for method in ("code", "tvolib"):
        bandit = [c for c in configs if c.schedule == "gp_bandit" and protocol_method(c) == method]
        print(f"arms of the bandit under the {method} protocol")
        print(arm_summary(collect_schedule_histories(bandit, root), ["seed"]).to_string())
PYEOF
  timeout 400 $PY "$OUT/fig4_slice_bandit.py" 2>&1 | tee "$OUT/fig4_slice_bandit.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  exit $status
fi

if [ "${1:-}" = "adaptive" ]; then
  echo "== Fig 13 slice of the gpu profile (S = 10, 5 seeds, 100 epochs; $*): the adaptive-d bandit, then log, =="
  echo "== moments and tvolib's bandit at each fixed d (on MNIST d = 5 is the bandit mode's slice), one group at a time =="
  if [[ " $* " == *" --tests "* ]]; then
    echo "== CUDA tests (-k cuda) =="
    timeout 90 $PY -m pytest tests -q -k cuda -p no:cacheprovider -rfE 2>&1 | tee "$OUT/tests.txt"
    rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || [ "$rc" = 5 ] || status=1
  fi
  cat > "$OUT/fig13_slice.py" <<'PYEOF'
import sys, tempfile, time
from tvolib import runs
from tvolib.paper.results import collect_schedule_histories
from tvolib.paper.sweeps import fig13_adaptive_d, protocol_method
if __name__ == "__main__":
    shrink = dict(epochs=20, n_train=600, n_test=100, eval_S=20, eval_every=10) if "--cpu-try" in sys.argv else {}
    device = "cpu" if shrink else "cuda"
    dataset = sys.argv[sys.argv.index("--dataset") + 1] if "--dataset" in sys.argv else "mnist"
    configs = [c.replace(**shrink) for c in fig13_adaptive_d("gpu")
               if c.dataset == dataset and protocol_method(c) != "code"]
    root = tempfile.mkdtemp()
    # On MNIST, d = 5 is the bandit mode's slice; on another dataset it comes first among the fixed d.
    fixed = (10, 2, 15) if dataset == "mnist" else (5, 10, 2, 15)
    if "--d" in sys.argv:  # e.g. --d 2,15: only these fixed d
        fixed = tuple(int(d) for d in sys.argv[sys.argv.index("--d") + 1].split(","))
    groups = ((15, True),) + tuple((d, False) for d in fixed)
    for d, adaptive in groups[1:] if "--fixed-only" in sys.argv else groups:
        group = [c for c in configs if (c.schedule == "gp_bandit_adaptive") == adaptive and c.d == d]
        t0 = time.perf_counter()
        frame = runs.run_configs(group, results_root=root, device=device, progress=False)
        frame["method"] = [protocol_method(c) for c in group]
        print(f"d = {d}{' (d_max, adaptive)' if adaptive else ''}: {len(group)} runs in {time.perf_counter() - t0:.1f} s")
        print(frame.groupby("method")[["test_log_px", "test_kl"]].agg(["mean", "sem", "count"]).round(2).to_string())
        if adaptive:
            rounds = collect_schedule_histories(group, root)
            for seed, part in rounds.groupby("seed"):
                print(f"seed {seed}: d trained {' '.join(map(str, part['d']))}; recommended "
                      f"{' '.join(str(int(d)) for d in part['recommended_d'].dropna())}")
        sys.stdout.flush()
PYEOF
  slice_s=560; [[ " $* " == *" --tests "* ]] && slice_s=470   # the whole mode stays under 10 minutes
  timeout $slice_s $PY "$OUT/fig13_slice.py" "${@:2}" 2>&1 | tee "$OUT/fig13_slice.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  exit $status
fi

echo "== CUDA tests (-k cuda) =="
timeout 60 $PY -m pytest tests -q -k cuda -p no:cacheprovider -rfE 2>&1 | tee "$OUT/tests.txt"
rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || [ "$rc" = 5 ] || status=1   # 5: no test selected

echo "== bench_stack.py: fp32 eager, and one stacked IWAE-1000 evaluation of 1 and 20 runs on 10k points =="
timeout 55 $BENCH --K 1 32 128 --eval-K 1 20 2>&1 | tee "$OUT/bench_fp32.txt"
echo "== bench_evaluate.py: IWAE-5000 one point at a time vs chunked (the speed-up target is >= 20x on a GPU) =="
timeout 60 $PY benchmarks/bench_evaluate.py --device cuda --points 200 2>&1 | tee "$OUT/bench_evaluate.txt"
for p in tf32 bf16; do
  echo "== bench_stack.py: $p eager =="
  timeout 30 $BENCH --K 32 128 --precision $p 2>&1 | tee "$OUT/bench_$p.txt"
done
echo "== bench_stack.py: bf16 + torch.compile (compiles once per K and S) =="
timeout 100 $BENCH --K 128 --precision bf16 --compile 2>&1 | tee "$OUT/bench_bf16_compile.txt"

echo "== precision check: fp32 / tf32 / bf16 at the reference configuration, one train_many call =="
timeout 90 $PY benchmarks/bench_precision.py --device cuda 2>&1 | tee "$OUT/precision.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

echo "== Fig 4 slice of the gpu profile through the runner (25 runs, one stack, 40 epochs), beside the cost model =="
cat > "$OUT/fig4_slice.py" <<'PYEOF'
import tempfile, time
from tvolib.paper.sweeps import fig4_vae_mnist_fashion
from tvolib.runs import run_configs
from tvolib.runs.cost import estimate_stack_seconds
if __name__ == "__main__":  # the bandit's worker processes (spawn) import this file
    configs = [c.replace(epochs=40) for c in fig4_vae_mnist_fashion("gpu")
               if c.dataset == "mnist" and c.S == 10 and c.d == 5]
    t0 = time.perf_counter()
    frame = run_configs(configs, results_root=tempfile.mkdtemp(), device="cuda", progress=False)
    seconds = time.perf_counter() - t0
    print(frame.groupby("schedule")["test_log_px"].agg(["mean", "std"]).round(2).to_string())
    print(f"Fig 4 slice: {len(configs)} runs x 40 epochs in {seconds:.1f} s through the runner "
          f"(cost model: {estimate_stack_seconds(configs):.1f} s; 100 epochs: model "
          f"{estimate_stack_seconds([c.replace(epochs=100) for c in configs]):.1f} s, an H200 took 138 s for the 20 runs of an earlier slice; target 45 s)")
PYEOF
timeout 160 $PY "$OUT/fig4_slice.py" 2>&1 | tee "$OUT/fig4_slice.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
