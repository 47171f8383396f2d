#include "runtime/offloaded_experts.h"

#include <utility>
#include <vector>

#include "model/scratch.h"

namespace dsv4::runtime {
namespace {

// An offloaded layer's routed experts (codes and block scales in mapped host memory) reach the
// device before its kernels run, in one of two ways. Below this many tokens the op copies the
// experts its routing touched (MoeWeightsView::touched_copies: a kernel, since the routing is on
// the device); from it the copy engines copy both stacks whole. Measured on an H200
// (docs/bench_log.md, "Expert offload"): the kernel moves 51 GB/s, the copy engines 55, and
// V4-Flash's 256 experts are 3.6 GB (66 ms); a step touches 188 of them at 64 tokens (54 ms
// touched, 67 ms whole), ~236 at 128, where the two meet, and all from ~512.
constexpr int64_t kCopyOffloadedLayerTokens = 128;

// Device scratch shaped like `stack`'s codes and block scales (kept alive by `keep`); the
// per-matrix scales are on the device already.
Result<format::Nvfp4View> device_bulk(const format::Nvfp4Tensor& stack, std::vector<Tensor>& keep) {
  format::Nvfp4View view = stack.view();
  for (TensorView* bulk : {&view.packed, &view.block_scale}) {
    DSV4_ASSIGN_OR_RETURN(Tensor copy, model::scratch(bulk->dtype, bulk->shape, Device::kCuda));
    *bulk = copy.view();
    keep.push_back(std::move(copy));
  }
  return view;
}

// The layer's routed experts as the op reads them: device scratch that the copy engines fill
// whole now, or (below kCopyOffloadedLayerTokens) that the op fills with the experts it touches.
Status place(const checkpoint::RoutedExpertWeights& experts, int64_t n_tokens,
             kernels::MoeWeightsView& view, std::vector<Tensor>& keep) {
  DSV4_ASSIGN_OR_RETURN(const format::Nvfp4View w13, device_bulk(*experts.w13_nvfp4, keep));
  DSV4_ASSIGN_OR_RETURN(const format::Nvfp4View w2, device_bulk(*experts.w2_nvfp4, keep));
  if (n_tokens < kCopyOffloadedLayerTokens) {
    view.touched_copies = {w13.packed, w13.block_scale, w2.packed, w2.block_scale};
    return ok_status();
  }
  for (auto [to, from] : {std::pair{w13, view.w13}, std::pair{w2, view.w2}}) {
    DSV4_RETURN_IF_ERROR(copy_tensor(to.packed, from.packed));
    DSV4_RETURN_IF_ERROR(copy_tensor(to.block_scale, from.block_scale));
  }
  view.w13 = w13, view.w2 = w2;
  return ok_status();
}

}  // namespace

Status experts_on_device(const model::RoutedExpertsCall& call, kernels::MoeWeightsView& view,
                         std::vector<Tensor>& keep) {
  view = call.weights;
  if (!call.experts->in_host_memory) return ok_status();
  return place(*call.experts, call.x.size(0), view, keep);
}

Status OffloadedExperts::run(const model::RoutedExpertsCall& call) {
  if (!call.experts->in_host_memory) return model::run_in_place(call);
  model::RoutedExpertsCall placed = call;
  std::vector<Tensor> copies;
  DSV4_RETURN_IF_ERROR(experts_on_device(call, placed.weights, copies));
  return model::run_in_place(placed);
}

}  // namespace dsv4::runtime
