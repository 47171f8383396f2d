// What undoing a compressor's last step needs (speculative decoding's rollback, model/
// cache_rollback.h): its counts before the step and, when the step pooled a block, the stream it
// pooled - the rows it kept before the step, then the step's new rows - copied before the pooled
// rows were dropped. Without a pool the rows stay in place and a rollback only shortens them.
// Armed before a verify step, read and cleared after it; an unarmed journal costs nothing. Its
// buffers stay from one step to the next: a step's decode rows (kernels::compressor_decode) write
// the stream there by address, and a step that needs no copy allocates nothing.
//
// Dimension letters: S stream rows (kept + new), J ≥ S the buffers' rows, c halves, d entry
// width.
#pragma once

#include <cstdint>

#include "base/buffer.h"

namespace dsv4::model {

struct CompressorJournal {
  bool armed = false;
  int64_t n_rows = 0;     // rows kept before the step
  int64_t n_entries = 0;  // entries before the step
  int64_t n_fed = 0;      // the step's new rows so far
  bool pooled = false;    // whether the step pooled: the stream is in kv and gate
  Tensor kv, gate;        // f32 [J, c·d]: rows [0, S) the stream, S = n_rows + n_fed

  int64_t n_stream() const { return n_rows + n_fed; }
  // Called by compressor_forward with the stream of a step that pooled, before it drops rows.
  Status record(const TensorView& stream_kv, const TensorView& stream_gate);
};

}  // namespace dsv4::model
