#!/usr/bin/env bash
# One device-machine call on a multi-GPU host (nvidia-h200-x2/x4/x8 or the H100 kinds): expert
# parallelism end to end (docs/ep.md §6, §7). NOT RUN YET: no multi-GPU machine has been lent.
#   1. the machine: GPUs, topology (NVLink), NCCL's library;
#   2. the memory plan of V4-Flash and V4-Pro for 2, 4, 8 GPUs (dsv4 check --plan);
#   3. kernels/ep on the GPUs: ep_cuda_tests (label multigpu) and ep_moe_bench;
#   4. the engine on a synthetic V4-Flash of all 43 layers (bench/synth_checkpoint, ~3.9 GB a
#      layer + 2.1 GB, 171 GB): dsv4 bench --gpus N --ep N --experts w4a4 for N = 2, 4, 8 up to
#      the GPUs present, then the single-GPU engine with expert offload as the baseline. Where the
#      largest of /tmp and /dev/shm cannot hold 43 layers (an x2 host: 128 GB of disk), it writes
#      as many as fit and says so.
# A device call ends at 10 minutes, so every step's timeout is cut to what is left of BUDGET_S
# (default 560 s), the steps in the order above: what ran comes back even if the last is cut.
# Logs to $OUT. Build with CUDA here, pack (scripts/device/pack.sh, which adds ep_cuda_tests and
# ep_moe_bench), then run this with carry ["build/carry"]:
#   scripts/device/ep_multi_gpu.sh [CONFIG] [BATCHES]
#     CONFIG   default tests/checkpoint/fixtures/v4_flash_config.json
#     BATCHES  comma separated, default 1,8,64
set -uo pipefail
config=${1:-tests/checkpoint/fixtures/v4_flash_config.json}
batches=${2:-1,8,64}
out=${OUT:-/tmp/dsv4_out}
mkdir -p "$out"
bins=$(mktemp -d)
tar xJf build/carry/bins.tar.xz -C "$bins"
export DSV4_SOURCE_DIR=$PWD
# Multicast objects stay off (KINDS.md); NCCL from PyTorch's environment (docs/ep.md §6).
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
nccl=$(python3 -c "import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],'lib'))" \
       2>/dev/null) && export LD_LIBRARY_PATH=$nccl:${LD_LIBRARY_PATH:-}

deadline=$(( $(date +%s) + ${BUDGET_S:-560} ))
# timeout for a step: its own cap, or what is left of the budget if less (at least 1 s).
cap() {
  local left=$(( deadline - $(date +%s) ))
  [ "$left" -lt "$1" ] && echo $(( left > 1 ? left : 1 )) || echo "$1"
}

n_gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | tee "$out/device.txt"
nvidia-smi topo -m > "$out/topo.txt" 2>&1

for fixture in v4_flash_config v4_pro_config; do
  for n in 2 4 8; do
    "$bins/dsv4" check --plan --gpus "$n" "tests/checkpoint/fixtures/$fixture.json" \
      >> "$out/plan.txt" 2>&1
  done
done

timeout "$(cap 180)" "$bins/ep_cuda_tests" > "$out/ep_cuda_tests.txt" 2>&1
echo "ep_cuda_tests: exit $?" | tee -a "$out/summary.txt"
timeout "$(cap 120)" "$bins/ep_moe_bench" > "$out/ep_moe_bench.txt" 2>&1
echo "ep_moe_bench: exit $?" | tee -a "$out/summary.txt"

# The synthetic checkpoint on whichever of /tmp and /dev/shm has the most room, as many of the
# config's layers as fit (bench.md's synth_checkpoint table: 3.92 GB a V4-Flash layer, 2.08 GB
# beside them, with 4 GB to spare).
read -r room dir < <(df --output=avail,file -B1 /tmp /dev/shm | tail -n +2 | sort -n | tail -1)
model=$dir/dsv4_synth
layers=$(python3 -c "import json;print(json.load(open('$config'))['num_hidden_layers'])")
fit=$(( (room / 1000000 - 6080) / 3920 ))
if [ "$fit" -lt "$layers" ]; then
  echo "synthetic model: $(( room / 1000000000 )) GB free in $dir, room for $fit of $layers" \
       "layers" | tee -a "$out/summary.txt"
  layers=$fit
fi
timeout "$(cap 240)" "$bins/synth_checkpoint" "$config" "$model" --layers "$layers" | tail -1 \
  | tee -a "$out/summary.txt"
# One bench per GPU count, every batch size in it (one load each); the multi-GPU runs first,
# the single-GPU baseline (expert offload: the experts do not fit one GPU) last.
for n in 2 4 8 1; do
  [ "$n" -le "$n_gpus" ] || continue
  gpus=(--gpus "$n" --ep "$n")
  # Graphs off at one GPU too: ranks cannot replay them, so the baseline steps as they do.
  [ "$n" -eq 1 ] && gpus=(--expert-offload auto --cuda-graph off)
  echo "== gpus $n, $layers layers, batches $batches" | tee -a "$out/engine.txt"
  timeout "$(cap 300)" "$bins/dsv4" bench --device cuda --model "$model" --experts w4a4 \
    "${gpus[@]}" --batch "$batches" --prompt-tokens 256 --gen-tokens 32 --repeats 3 2>&1 |
    grep -E "^batch|time to first|decode step|unimplemented|error|note" | tee -a "$out/engine.txt"
done
rm -rf "$model"
echo "elapsed $(( $(date +%s) + ${BUDGET_S:-560} - deadline )) s" | tee -a "$out/summary.txt"
tail -n 20 "$out/summary.txt" "$out/plan.txt" "$out/engine.txt"
