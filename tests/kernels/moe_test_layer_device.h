// A moe_test_layer.h layer copied to the GPU, for the tests of the CUDA MoE block and of what
// runs it (expert parallelism on one GPU).
#pragma once

#include "moe_test_layer.h"
#include "testing/device.h"

namespace dsv4::kernels::moe_test {

// The layer with every tensor on the device (its view() then serves the CUDA op); with
// `routed_in_host_memory` the routed experts' codes and block scales in mapped pinned host
// memory instead, as expert offload places them.
inline MoeTestLayer on_device(const MoeTestLayer& l, bool routed_in_host_memory) {
  using dsv4::testing::to_device;
  using dsv4::testing::to_device_or_empty;
  MoeTestLayer d;
  d.dim = l.dim, d.ffn = l.ffn, d.n_experts = l.n_experts, d.k_used = l.k_used, d.vocab = l.vocab;
  d.gate = to_device(l.gate.view());
  d.bias = to_device(l.bias.view());
  d.tid2eid = to_device(l.tid2eid.view());
  d.w13 = routed_in_host_memory ? dsv4::testing::to_mapped_host(l.w13) : to_device(l.w13);
  d.w2 = routed_in_host_memory ? dsv4::testing::to_mapped_host(l.w2) : to_device(l.w2);
  d.shared_w13 = to_device(l.shared_w13);
  d.shared_w2 = to_device(l.shared_w2);
  d.with_shared = l.with_shared;
  d.w13_input_scale = to_device_or_empty(l.w13_input_scale);
  d.w2_input_scale = to_device_or_empty(l.w2_input_scale);
  d.config = l.config;
  return d;
}

}  // namespace dsv4::kernels::moe_test
