// The decode rows' cache writes (kernels/ops.h, "Decode rows"): each row's sequence's buffers
// reached through its address, and what a one-token step of that sequence does to them, written
// with the same ops (compressor_pool, rms_norm_rope) on views of those buffers, so a batched
// call is its rows' single calls by construction.
//
// Dimension letters: T rows, Dh head dim, R ring rows, m compress ratio, c halves, d entry width.
#include <algorithm>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {
namespace {

// The f32 [n_rows, width] buffer at a table's address, on the host.
TensorView host_rows(int64_t address, int64_t n_rows, int64_t width) {
  return TensorView::contiguous(reinterpret_cast<float*>(address), DType::kF32, Device::kCpu,
                                {n_rows, width});
}

// Whether row t continues the run of the row before (kernels/ops.h: a sequence's consecutive
// rows), and the end of the run from row t.
bool continues_run(const CompressorDecodeOperands& o, int64_t t) {
  return t > 0 && o.kv_rows[t - 1] == o.kv_rows[t] && o.positions[t] == o.positions[t - 1] + 1;
}
int64_t run_end(const CompressorDecodeOperands& o, int64_t t) {
  int64_t end = t + 1;
  while (end < o.n_rows && continues_run(o, end)) ++end;
  return end;
}

// The run from row t, its sequence keeping n_kept rows before it: when a row of it pools, its
// stream (those rows, then the run's) into the journal, before any row is fed.
void journal_run(const CompressorDecodeOperands& o, bool overlap, int64_t t, int64_t n_kept,
                 int64_t row_width) {
  const int64_t end = run_end(o, t);
  bool pools = false;
  for (int64_t r = t; r < end; ++r) {
    pools = pools || compressor_decode_slot(o.positions[r], o.ratio, overlap).pools;
  }
  if (!pools) return;
  const auto feed = [&](const int64_t* kept, const float* rows, const int64_t* journal) {
    float* to = reinterpret_cast<float*>(journal[t]);
    std::copy_n(reinterpret_cast<const float*>(kept[t]), n_kept * row_width, to);
    std::copy_n(rows + t * row_width, (end - t) * row_width, to + n_kept * row_width);
  };
  feed(o.kv_rows, o.kv, o.kv_journal);
  feed(o.gate_rows, o.gate, o.gate_journal);
}

}  // namespace

void window_write(const TensorView& rows, const TensorView& rings, int64_t n_ring_rows,
                  const TensorView& positions) {
  const WindowWriteOperands o = window_write_operands(rows, rings, n_ring_rows, positions);
  for (int64_t t = 0; t < o.n_rows; ++t) {
    float* ring = reinterpret_cast<float*>(o.rings[t]);
    const int64_t slot = o.positions[t] % o.n_ring_rows;
    std::copy_n(o.rows + t * o.width, o.width, ring + slot * o.width);
  }
}

void compressor_decode(const CompressorDecodeParams& p) {
  const CompressorDecodeOperands o = compressor_decode_operands(p);
  const int64_t row_width = o.n_halves * o.width;
  for (int64_t t = 0; t < o.n_rows; ++t) {
    const CompressorDecodeSlot at = compressor_decode_slot(o.positions[t], o.ratio, p.overlap);
    const TensorView kv = host_rows(o.kv_rows[t], 2 * o.ratio, row_width);
    const TensorView gate = host_rows(o.gate_rows[t], 2 * o.ratio, row_width);
    if (o.kv_journal != nullptr && o.kv_journal[t] != 0 && !continues_run(o, t)) {
      journal_run(o, p.overlap, t, at.row, row_width);
    }
    std::copy_n(o.kv + t * row_width, row_width, kv.data_as<float>() + at.row * row_width);
    std::copy_n(o.gate + t * row_width, row_width, gate.data_as<float>() + at.row * row_width);
    if (!at.pools) continue;
    const TensorView entry =
        host_rows(o.entries[t] + at.entry * o.width * int64_t{sizeof(float)}, 1, o.width);
    CompressorPoolParams pool;
    pool.kv = kv.rows(0, at.row + 1);
    pool.gate = gate.rows(0, at.row + 1);
    pool.ape = p.ape;
    pool.overlap = p.overlap;
    pool.out = entry;
    cpu::compressor_pool(pool);
    int64_t position = at.entry * o.ratio;
    cpu::rms_norm_rope(entry, p.norm_weight, o.eps,
                       TensorView::contiguous(&position, DType::kI64, Device::kCpu, {1}),
                       p.inv_freq);
    if (!p.overlap) continue;  // nothing kept: the block was the only rows
    // The block just pooled is the next window's A halves: it moves to the front.
    std::copy_n(kv.data_as<float>() + o.ratio * row_width, o.ratio * row_width,
                kv.data_as<float>());
    std::copy_n(gate.data_as<float>() + o.ratio * row_width, o.ratio * row_width,
                gate.data_as<float>());
  }
}

}  // namespace dsv4::kernels::cpu
