// Which layers' routed experts stay packed in NVFP4 instead of being decoded to f32, and how their
// pieces get there. The engine's NVFP4 MoE path needs a layer's two stacks (w13, w2) in the same
// form, so a layer is packed when both are NVFP4 in the checkpoint (copied as they are) or both
// MXFP4 that NVFP4 holds exactly (mxfp4_as_nvfp4.h); every other layer is decoded to f32.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "checkpoint/binding.h"
#include "checkpoint/mxfp4_as_nvfp4.h"
#include "format/nvfp4.h"

namespace dsv4::checkpoint {

class ExpertPacking {
 public:
  // Plans every layer of `binding`; with keep_packed false no layer is packed. What it decides
  // for MXFP4 layers, and why a layer stays f32, goes to report.notes.
  static ExpertPacking plan(const Binding& binding, const ModelConfig& config, bool keep_packed,
                            LoadReport& report);

  // Whether `slot` is a routed-expert stack of a packed layer.
  bool packed(const BoundSlot& slot) const;
  // The empty stack `slot` fills (linear scales; input_scale only if every piece has one).
  Result<format::Nvfp4Tensor> allocate(const BoundSlot& slot) const;
  // Its bytes without the input scales (codes, block scales, global scales): a lower bound.
  static int64_t packed_bytes(const BoundSlot& slot);
  // Its codes and block scales alone: what expert offload may keep in host memory.
  static int64_t bulk_bytes(const BoundSlot& slot);
  // Copies one piece of a packed slot into its place in `out`.
  void copy_piece(const BoundSlot& slot, const BoundPiece& piece, format::Nvfp4Tensor& out) const;

 private:
  // A packed stack's tensors: codes, block scales, and the per-matrix scales.
  struct StackShapes {
    Shape packed, block_scale, per_matrix;
  };
  static StackShapes stack_shapes(const BoundSlot& slot);

  std::vector<bool> packed_layers_;
  std::map<std::pair<Param, int64_t>, Mxfp4AsNvfp4> from_mxfp4_;  // by (param, layer)
};

}  // namespace dsv4::checkpoint
