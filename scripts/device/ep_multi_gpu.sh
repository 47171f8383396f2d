#!/usr/bin/env bash
# One device-machine call on a multi-GPU host (nvidia-h200-x2/x4/x8 or the H100 kinds): expert
# parallelism end to end (docs/ep.md §6, §7). NOT RUN YET: no multi-GPU machine has been lent.
#   1. the machine: GPUs, topology (NVLink), NCCL's library;
#   2. kernels/ep on the GPUs: ep_cuda_tests (label multigpu) and ep_moe_bench;
#   3. the memory plan of V4-Flash and V4-Pro for 2, 4, 8 GPUs (dsv4 check --plan);
#   4. the engine on a synthetic V4-Flash of all 43 layers (bench/synth_checkpoint, ~4 GB a
#      layer, 175 GB on local disk): dsv4 bench --gpus N --experts w4a4 for N = 2, 4, 8 up to the
#      GPUs present, and the single-GPU engine with expert offload as the baseline.
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

n_gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | tee "$out/device.txt"
nvidia-smi topo -m > "$out/topo.txt" 2>&1

timeout 300 "$bins/ep_cuda_tests" > "$out/ep_cuda_tests.txt" 2>&1
echo "ep_cuda_tests: exit $?" | tee -a "$out/summary.txt"
timeout 280 "$bins/ep_moe_bench" > "$out/ep_moe_bench.txt" 2>&1
echo "ep_moe_bench: exit $?" | tee -a "$out/summary.txt"

for fixture in v4_flash_config v4_pro_config; do
  for n in 2 4 8; do
    "$bins/dsv4" check --plan --gpus "$n" "tests/checkpoint/fixtures/$fixture.json" \
      >> "$out/plan.txt" 2>&1
  done
done

# 175 GB: x4/x8 hosts have 235 GB of disk, x2 hosts 128 GB, so take whichever of /tmp and
# /dev/shm has the most room.
room=$(df --output=avail,file -B1 /tmp /dev/shm | tail -n +2 | sort -n | tail -1 | awk '{print $2}')
model=$room/dsv4_synth_43
layers=$(python3 -c "import json;print(json.load(open('$config'))['num_hidden_layers'])")
timeout 1800 "$bins/synth_checkpoint" "$config" "$model" --layers "$layers" | tail -1 \
  | tee -a "$out/summary.txt"
for batch in ${batches//,/ }; do
  for n in 1 2 4 8; do
    [ "$n" -le "$n_gpus" ] || continue
    gpus=(--gpus "$n")
    [ "$n" -eq 1 ] && gpus=(--expert-offload auto)  # the baseline: one GPU, offload as needed
    echo "== gpus $n, batch $batch" | tee -a "$out/engine.txt"
    timeout 600 "$bins/dsv4" bench --device cuda --model "$model" --experts w4a4 "${gpus[@]}" \
      --batch "$batch" --prompt-tokens 256 --gen-tokens 32 --repeats 3 2>&1 |
      grep -E "time to first|decode step|unimplemented|error|note" | tee -a "$out/engine.txt"
  done
done
rm -rf "$model"
tail -n 20 "$out/summary.txt" "$out/plan.txt" "$out/engine.txt"
