// transformers' DeepseekV4Attention.forward, step by step, over the per-sequence cache (see
// attention_cache.h). Where the official reference (../shared/docs/deepseek_v4.md §2.4) differs,
// we follow transformers, the oracle of our tests:
//   - no FP8 round trip of the kv nope dims or of the compressed entries (§2.4.1, §2.4.4);
//   - no Hadamard rotation or FP4 round trip in the indexer (§2.4.5);
//   - the compressor's pooled entry is normed in f32, not cast to bf16 first.
//
// Dimension letters: T tokens of a step, D model width, Q q_lora_rank, H heads, Dh head dim,
// W window, R ring rows, N compressed entries, G output groups, Ro o_lora_rank.
#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "model/cache_copy.h"
#include "model/compressor.h"
#include "model/indexer.h"
#include "model/linear.h"
#include "model/upload.h"

namespace dsv4::model {
namespace {

using checkpoint::AttentionType;

// Whether a profile's sparse attention is the fast profile's bf16 tensor-core one on the GPU
// (for the head dims ≤ 512 it takes), else the exact f32 one.
bool fast_attention(int64_t head_dim, Device device, Numerics numerics) {
  return numerics == Numerics::kFast && device == Device::kCuda && head_dim % 4 == 0 &&
         head_dim <= 512;
}

Status sparse_attention(const kernels::SparseAttentionParams& p, Numerics numerics) {
  return fast_attention(p.q.size(2), p.q.device, numerics) ? kernels::sparse_attention_bf16(p)
                                                           : kernels::sparse_attention(p);
}

// Whether the fast attention makes wo_a's FP8 input in its own launch (kernels/ops.h,
// SparseAttentionParams::out_fp8: where a head's FP8 groups of 128 are its own).
bool attention_makes_fp8(const checkpoint::ModelConfig& config, Device device, Numerics numerics) {
  return fast_attention(config.head_dim, device, numerics) && config.head_dim % 128 == 0;
}

// The output of a call's rows (o: the rows and, where the attention makes it, their FP8 form),
// the FP8 form's backward RoPE at the rows' positions.
void set_output(kernels::SparseAttentionParams& attn, const LinearInput& o,
                const TensorView& positions, const TensorView& inv_freq) {
  attn.out = o.x;
  if (!o.quantized()) return;
  attn.out_fp8 = o.fp8;
  attn.rope_positions = positions;
  attn.rope_inv_freq = inv_freq;
}

// q = rope(per-head RMSNorm(wq_b(q_latent))), q_latent = q_norm(wq_a(x)). q_latent is written,
// and where it has room for its FP8 form (the two wq_b's FP8 GEMMs read it) the norm quantizes
// it there too.
Status project_query(const checkpoint::ModelConfig& config,
                     const checkpoint::AttentionWeights& weights, const LinearInput& x,
                     const TensorView& positions, const TensorView& inv_freq,
                     const LinearInput& q_latent, const TensorView& q, Numerics numerics) {
  const float eps = static_cast<float>(config.rms_norm_eps);
  const int64_t n_tokens = x.x.size(0);
  const TensorView& latent = q_latent.x;
  DSV4_RETURN_IF_ERROR(linear(x, weights.wq_a, latent, numerics));
  DSV4_RETURN_IF_ERROR(
      rms_norm_for_linears(latent, weights.q_norm.view(), eps, latent, q_latent.fp8));
  const TensorView q_rows = q.reshaped({n_tokens, config.n_head * config.head_dim});
  DSV4_RETURN_IF_ERROR(linear(q_latent, weights.wq_b, q_rows, numerics));
  return kernels::rms_norm_rope(q, TensorView{}, eps, positions, inv_freq);
}

// kv = rope(kv_norm(wkv(x))).
Result<Tensor> project_kv(const checkpoint::ModelConfig& config,
                          const checkpoint::AttentionWeights& weights, const LinearInput& x,
                          const TensorView& positions, const TensorView& inv_freq,
                          Numerics numerics) {
  DSV4_ASSIGN_OR_RETURN(Tensor kv,
                        Tensor::empty(DType::kF32, {x.x.size(0), config.head_dim}, x.x.device));
  DSV4_RETURN_IF_ERROR(linear(x, weights.wkv, kv.view(), numerics));
  DSV4_RETURN_IF_ERROR(kernels::rms_norm_rope(kv.view(), weights.kv_norm.view(),
                                              static_cast<float>(config.rms_norm_eps), positions,
                                              inv_freq));
  return kv;
}

// One sequence's kv rows [T, Dh] into its window ring at rows position mod R.
Status write_window(const TensorView& kv, int64_t start_pos, AttentionCache& cache) {
  const int64_t n_tokens = kv.size(0);
  // T ≤ Ts < R, so the rows wrap around the ring at most once.
  const int64_t n_ring = cache.window.shape()[0];
  int64_t t = 0;
  while (t < n_tokens) {
    const int64_t slot = (start_pos + t) % n_ring;
    const int64_t n = std::min(n_tokens - t, n_ring - slot);
    DSV4_RETURN_IF_ERROR(copy_tensor(cache.window.view().rows(slot, slot + n), kv.rows(t, t + n)));
    t += n;
  }
  return ok_status();
}

// i32 [T, W] of a step (window_index_values), one upload for all sequences.
Result<Tensor> window_indices(std::span<const SequenceRows> sequences,
                              const std::vector<int64_t>& positions, int64_t window,
                              Device device) {
  return upload(window_index_values(sequences, positions, window),
                {static_cast<int64_t>(positions.size()), window}, device);
}

// One layer's buffer addresses of a step's sequences (cache_addresses): a view of the forward's
// table, or one made for these sequences.
class StepAddresses {
 public:
  StepAddresses() = default;
  // Layer `layer`'s lists in a table of S sequences, from sequence `first` on.
  StepAddresses(const Tensor& table, int64_t layer, int64_t first)
      : base_(table.view().data_as<const int64_t>() +
              (layer * kCacheBuffers * table.shape()[2] + first)),
        stride_(table.shape()[2]),
        device_(table.device()) {}

  // Made and uploaded for `sequences` (one layer's caches, one column a row).
  static Result<StepAddresses> of(std::span<const SequenceRows> sequences, Device device) {
    DSV4_ASSIGN_OR_RETURN(Tensor table, cache_addresses(address_columns(sequences), 1, device));
    StepAddresses made(table, 0, 0);
    made.owned_ = std::move(table);  // the buffer, and so base_, stays where it is
    return made;
  }

  bool empty() const { return base_ == nullptr; }

  // i64 [to − from]: `buffer`'s addresses of columns [from, to).
  TensorView of(CacheBuffer buffer, int64_t from, int64_t to) const {
    return TensorView::contiguous(const_cast<int64_t*>(base_ + buffer * stride_ + from),
                                  DType::kI64, device_, {to - from});
  }

 private:
  const int64_t* base_ = nullptr;
  int64_t stride_ = 0;
  Device device_ = Device::kCpu;
  Tensor owned_;
};

// y = wo_b(concat_g wo_a[g] · o_g): o [T, H·Dh] seen as G groups of H/G heads.
Status project_output(const checkpoint::ModelConfig& config,
                      const checkpoint::AttentionWeights& weights, const LinearInput& o,
                      const TensorView& out, Numerics numerics) {
  const int64_t n_tokens = o.x.size(0);
  const int64_t n_groups = config.o_groups;
  const int64_t rank = config.o_lora_rank;
  DSV4_ASSIGN_OR_RETURN(Tensor low,
                        Tensor::empty(DType::kF32, {n_tokens, n_groups * rank}, o.x.device));
  DSV4_RETURN_IF_ERROR(block_diagonal_linear(o, weights.wo_a, n_groups, low.view(), numerics));
  return linear(low.view(), weights.wo_b, out, numerics);
}

// The compressed entries a step's queries may attend to, and which per query: CSA the
// indexer's picks i32 [T, K]; HCA every entry so far, 0 … N − 1 ([1, N], the cache's
// entry_ids), each query seeing those whose block is complete at its position (`causal`).
// Empty on sliding layers and before the first block completes.
struct CompressedCandidates {
  TensorView entries;  // f32 [N, Dh]
  TensorView indices;
  Tensor picks;  // what `indices` views on CSA
  bool causal = false;
};

// The candidates of one sequence's rows among the entries complete at its last row's position
// (its compressors were fed these rows, and maybe later ones of the same prompt).
Result<CompressedCandidates> compressed_candidates(const checkpoint::ModelConfig& config,
                                                   const IndexerStep& step,
                                                   const AttentionCache& cache) {
  if (!cache.compressor) return CompressedCandidates{};
  const CompressorCache& compressor = *cache.compressor;
  const int64_t n_entries =
      kernels::visible_entries(step.host_positions.back(), compressor.ratio, compressor.n_entries);
  if (n_entries == 0) return CompressedCandidates{};
  CompressedCandidates candidates;
  candidates.entries = compressor.entries.view().rows(0, n_entries);
  if (cache.indexer) {
    DSV4_ASSIGN_OR_RETURN(candidates.picks, indexer_picks(config, step, *cache.indexer, n_entries));
    candidates.indices = candidates.picks.view();
  } else {
    candidates.indices = cache.entry_ids.view().rows(0, n_entries).reshaped({1, n_entries});
    candidates.causal = true;
  }
  return candidates;
}

// One sequence's rows of a step: attention over its own cache (its window ring written first),
// the query rows q [T, H, Dh] and their window_indices in, the output rows o out (set_output).
Status attend_sequence(const checkpoint::ModelConfig& config,
                       const checkpoint::AttentionWeights& weights, const IndexerStep& step,
                       const TensorView& kv, const TensorView& q, const TensorView& window_rows,
                       int64_t start_pos, AttentionCache& cache, const LinearInput& o) {
  DSV4_RETURN_IF_ERROR(write_window(kv, start_pos, cache));
  DSV4_ASSIGN_OR_RETURN(CompressedCandidates compressed,
                        compressed_candidates(config, step, cache));
  kernels::SparseAttentionParams attn;
  attn.q = q;
  attn.kv = cache.window.view();
  attn.indices = window_rows;
  attn.extra_kv = compressed.entries;
  attn.extra_indices = compressed.indices;
  if (compressed.causal) {
    attn.extra_positions = step.positions;
    attn.extra_ratio = cache.compressor->ratio;
  }
  attn.sinks = weights.attn_sink.view();
  attn.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(config.head_dim)));
  set_output(attn, o, step.positions, step.inv_freq);
  return sparse_attention(attn, step.numerics);
}

// The per-token inputs of one step's rows, computed once for all sequences of the step.
struct StepRows {
  TensorView x;
  TensorView q;
  TensorView kv;
  TensorView window_rows;  // window_indices
  TensorView positions;    // i64 [T]
  std::span<const int64_t> host_positions;
  TensorView inv_freq;
  TensorView index_q;        // CSA layers: the indexer's queries and head weights
  TensorView index_weights;  // (IndexerQueries)
  // A step of several sequences: the compressors' projections of every row (else null: each
  // sequence projects its own rows straight into its cache).
  const CompressorRows* compressor_rows = nullptr;
  const CompressorRows* index_compressor_rows = nullptr;
  LinearInput o;                  // [T, H, Dh], and wo_a's FP8 input where the attention makes it
  TensorView capacity_entry_ids;  // RowPositions::capacity_entry_ids
  Numerics numerics = Numerics::kExact;
};

// Rows [from, to) as one sequence's compressor input: its tokens, with their projections when
// the step made them.
CompressorInput compressor_input(const StepRows& rows, const CompressorRows* projected,
                                 int64_t from, int64_t to) {
  CompressorInput input{rows.x.rows(from, to), TensorView{}, TensorView{}, rows.numerics};
  if (projected != nullptr) {
    input.kv = projected->kv.view().rows(from, to);
    input.gate = projected->gate.view().rows(from, to);
  }
  return input;
}

// Feeds rows [from, to) of one sequence to a compressed layer's compressors (the attention's, and
// the indexer's, which must see every token whether or not an entry exists yet): their entries
// for every block the rows complete.
Status compress_rows(const checkpoint::ModelConfig& config,
                     const checkpoint::AttentionWeights& weights, const StepRows& rows,
                     int64_t from, int64_t to, AttentionCache& cache) {
  if (!cache.compressor) return ok_status();
  const float eps = static_cast<float>(config.rms_norm_eps);
  DSV4_RETURN_IF_ERROR(compressor_forward(*weights.compressor,
                                          compressor_input(rows, rows.compressor_rows, from, to),
                                          rows.inv_freq, eps, *cache.compressor));
  if (!cache.indexer) return ok_status();
  return compressor_forward(weights.indexer->compressor,
                            compressor_input(rows, rows.index_compressor_rows, from, to),
                            rows.inv_freq, eps, *cache.indexer);
}

// Rows [from, to) of one sequence as the indexer's step: their queries, positions and the
// indexer compressor's input.
IndexerStep indexer_step(const checkpoint::AttentionWeights& weights, const StepRows& rows,
                         int64_t from, int64_t to) {
  IndexerStep step;
  step.rows = compressor_input(rows, rows.index_compressor_rows, from, to);
  if (weights.indexer) {
    step.q = rows.index_q.rows(from, to);
    step.head_weights = rows.index_weights.rows(from, to);
  }
  step.positions = rows.positions.rows(from, to);
  step.host_positions.assign(rows.host_positions.begin() + from, rows.host_positions.begin() + to);
  step.inv_freq = rows.inv_freq;
  step.numerics = rows.numerics;
  return step;
}

// Rows [from, to) of one sequence (a whole prompt's rows, or the part before or after its
// snapshot), its compressors fed the rows already, attend over its cache, which then holds
// them.
Status attend_rows(const checkpoint::ModelConfig& config,
                   const checkpoint::AttentionWeights& weights, const StepRows& rows,
                   const SequenceRows& seq, int64_t from, int64_t to) {
  DSV4_RETURN_IF_ERROR(attend_sequence(
      config, weights, indexer_step(weights, rows, from, to), rows.kv.rows(from, to),
      rows.q.rows(from, to), rows.window_rows.rows(from, to), seq.start_pos + from - seq.begin,
      *seq.cache, rows.o.rows(from, to)));
  seq.cache->n_tokens += to - from;
  return ok_status();
}

// Rows [from, to) of one sequence's prompt: the compressors fed them all at once (a pooling
// launch a compressor, not one a piece), then the attention in pieces of at most Ts rows (the
// ring holds W + Ts − 1 rows: a piece's rows and the W − 1 before them), each piece seeing the
// entries complete at its last row.
Status attend_part(const checkpoint::ModelConfig& config,
                   const checkpoint::AttentionWeights& weights, const StepRows& rows,
                   const SequenceRows& seq, int64_t from, int64_t to) {
  if (from == to) return ok_status();
  DSV4_RETURN_IF_ERROR(compress_rows(config, weights, rows, from, to, *seq.cache));
  const int64_t ts = seq.cache->max_step_tokens;
  for (int64_t begin = from; begin < to; begin += ts) {
    DSV4_RETURN_IF_ERROR(attend_rows(config, weights, rows, seq, begin, std::min(to, begin + ts)));
  }
  return ok_status();
}

// A sequence's rows that are not a decode run (a prompt or its chunk) over its cache: the part
// before its snapshot's position, the state copied, then the rest, so keeping it costs the batch
// no step of its own.
Status attend_prompt(const checkpoint::ModelConfig& config,
                     const checkpoint::AttentionWeights& weights, const StepRows& rows,
                     const SequenceRows& seq) {
  const int64_t split = seq.begin + seq.snapshot_at - seq.start_pos;
  if (seq.snapshot == nullptr || split > seq.end) {
    return attend_part(config, weights, rows, seq, seq.begin, seq.end);
  }
  DSV4_RETURN_IF_ERROR(attend_part(config, weights, rows, seq, seq.begin, split));
  DSV4_RETURN_IF_ERROR(copy_cache_state(*seq.cache, *seq.snapshot));
  return attend_part(config, weights, rows, seq, split, seq.end);
}

// The decode rows' cache holding the most entries (the one of the latest position), `caches`
// the rows'.
const AttentionCache* widest_cache(std::span<AttentionCache* const> caches,
                                   std::span<const int64_t> host_positions) {
  const auto latest = std::max_element(host_positions.begin(), host_positions.end());
  return caches[latest - host_positions.begin()];
}

// How wide decode rows take a compressed source (`buffer` of a cache: f32 [C, d] entries): as
// the most entries a row has, (p + 1) / m at the latest position p, or, with capacity ids
// (RowPositions::capacity_entry_ids), as the largest capacity C among the rows' caches.
template <typename Buffer>
int64_t decode_width(std::span<AttentionCache* const> caches,
                     std::span<const int64_t> host_positions,
                     const TensorView& capacity_entry_ids, const Buffer& buffer) {
  if (capacity_entry_ids.data == nullptr) {
    const int64_t latest = *std::max_element(host_positions.begin(), host_positions.end());
    return (latest + 1) / caches.front()->compressor->ratio;
  }
  int64_t width = 0;
  for (const AttentionCache* cache : caches) width = std::max(width, buffer(*cache).shape()[0]);
  DSV4_CHECK(width <= capacity_entry_ids.numel(), "decode rows: %lld entries past %lld ids",
             (long long)width, (long long)capacity_entry_ids.numel());
  return width;
}

// A run of decode rows (sequences `run` of the step, rows [from, to), one a token: a sequence's
// consecutive; columns [first, first + to − from) of `addresses`), each over its own cache, in
// one launch an op for all of them (kernels/ops.h, "Decode rows"): every row the numbers
// attend_rows gives it alone, whatever the run, and a sequence's rows those of one-token steps.
Status attend_decode_rows(const checkpoint::ModelConfig& config,
                          const checkpoint::AttentionWeights& weights, const StepRows& rows,
                          std::span<const SequenceRows> run, const StepAddresses& addresses,
                          int64_t first) {
  const int64_t from = run.front().begin, to = run.back().end, n = to - from;
  const int64_t last = first + n;
  const TensorView positions = rows.positions.rows(from, to);
  const std::span<const int64_t> host_positions = rows.host_positions.subspan(from, n);
  const AttentionCache& front = *run.front().cache;
  const float eps = static_cast<float>(config.rms_norm_eps);
  const std::vector<AttentionCache*> caches = address_columns(run);  // [n]: each row's
  std::vector<CompressorCache*> compressors, indexers;
  for (AttentionCache* cache : caches) {
    DSV4_CHECK(cache->window.shape() == front.window.shape(),
               "attend_decode_rows: rings of different sizes in one run");
    if (cache->compressor) compressors.push_back(&*cache->compressor);
    if (cache->indexer) indexers.push_back(&*cache->indexer);
  }
  DSV4_RETURN_IF_ERROR(kernels::window_write(rows.kv.rows(from, to),
                                             addresses.of(kRing, first, last),
                                             front.window.shape()[0], positions));
  kernels::SparseAttentionParams attn;
  attn.q = rows.q.rows(from, to);
  attn.kv = front.window.view();
  attn.kv_addresses = addresses.of(kRing, first, last);
  attn.indices = rows.window_rows.rows(from, to);
  Tensor picks;
  if (front.compressor) {
    DSV4_CHECK(rows.compressor_rows != nullptr, "attend_decode_rows: no compressor projections");
    // One compressor's rows of the run: the step's projections, its buffers' addresses
    // (kv rows, gate rows, entries, the journals': consecutive CacheBuffers) and caches.
    const auto decode_rows = [&](const CompressorRows& projected, CacheBuffer kv_rows,
                                 std::span<CompressorCache* const> compressor_caches) {
      return CompressorDecodeRows{projected.kv.view().rows(from, to),
                                  projected.gate.view().rows(from, to),
                                  addresses.of(kv_rows, first, last),
                                  addresses.of(CacheBuffer(kv_rows + 1), first, last),
                                  addresses.of(CacheBuffer(kv_rows + 2), first, last),
                                  addresses.of(CacheBuffer(kv_rows + 3), first, last),
                                  addresses.of(CacheBuffer(kv_rows + 4), first, last),
                                  positions,
                                  host_positions,
                                  compressor_caches};
    };
    DSV4_RETURN_IF_ERROR(compressor_decode_rows(
        *weights.compressor, decode_rows(*rows.compressor_rows, kKvRows, compressors),
        rows.inv_freq, eps));
    if (front.indexer) {
      const IndexerDecodeRows index{
          decode_rows(*rows.index_compressor_rows, kIndexKvRows, indexers),
          rows.index_q.rows(from, to), rows.index_weights.rows(from, to), rows.inv_freq,
          rows.numerics};
      DSV4_ASSIGN_OR_RETURN(
          picks, indexer_decode_rows(config, *weights.indexer, index,
                                     decode_width(caches, host_positions, rows.capacity_entry_ids,
                                                  [](const AttentionCache& c) -> const Tensor& {
                                                    return c.indexer->entries;
                                                  })));
    }
    // The extra source as wide as the most entries a row has (a row sees its own only: the
    // kernel reads each row's entries through the table), or as the caches' capacity.
    const int64_t ratio = front.compressor->ratio;
    const int64_t n_entries = decode_width(
        caches, host_positions, rows.capacity_entry_ids,
        [](const AttentionCache& c) -> const Tensor& { return c.compressor->entries; });
    if (n_entries > 0) {
      attn.extra_kv = TensorView::contiguous(front.compressor->entries.view().data, DType::kF32,
                                             front.compressor->entries.device(),
                                             {n_entries, config.head_dim});
      attn.extra_addresses = addresses.of(kEntries, first, last);
      attn.row_positions = positions;
      attn.extra_ratio = ratio;
      if (front.indexer) {
        attn.extra_indices = picks.view();
      } else {
        const TensorView ids = rows.capacity_entry_ids.data != nullptr
                                   ? rows.capacity_entry_ids
                                   : widest_cache(caches, host_positions)->entry_ids.view();
        attn.extra_indices = ids.rows(0, n_entries).reshaped({1, n_entries});
        attn.extra_positions = positions;
      }
    }
  }
  attn.sinks = weights.attn_sink.view();
  attn.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(config.head_dim)));
  set_output(attn, rows.o.rows(from, to), positions, rows.inv_freq);
  DSV4_RETURN_IF_ERROR(sparse_attention(attn, rows.numerics));
  for (const SequenceRows& seq : run) seq.cache->n_tokens += seq.end - seq.begin;
  return ok_status();
}

// One step's rows' positions: a slice of the forward's RowPositions.
struct StepPositions {
  std::span<const int64_t> host;
  TensorView positions;
  TensorView window_rows;
  TensorView capacity_entry_ids;
  TensorView inv_freq;  // f32 [P]: the layer's RoPE frequencies (RopeTables)

  StepPositions rows(int64_t begin, int64_t end) const {
    return {host.subspan(begin, end - begin), positions.rows(begin, end),
            window_rows.rows(begin, end), capacity_entry_ids, inv_freq};
  }
};

// One step of every sequence in `sequences` (rows [begin, end) of x): the per-token projections
// run on all rows at once, so a batch reads the attention weights once, not once a sequence, and
// a long prompt's run as one GEMM, not one a piece of Ts rows; the caches and the attention
// sequence by sequence (a prompt a piece at a time, attend_prompt), a run of decode rows in one
// launch an op.
Status attention_step(const checkpoint::ModelConfig& config,
                      const checkpoint::AttentionWeights& weights, const LinearInput& in,
                      std::span<const SequenceRows> sequences, const StepPositions& at,
                      const StepAddresses& addresses, const TensorView& out, Numerics numerics) {
  const TensorView& x = in.x;
  const int64_t n_tokens = x.size(0);
  const Device device = x.device;
  const TensorView inv_freq = at.inv_freq;

  DSV4_ASSIGN_OR_RETURN(Tensor q_latent,
                        Tensor::empty(DType::kF32, {n_tokens, config.q_lora_rank}, device));
  DSV4_ASSIGN_OR_RETURN(
      const Fp8Room q_latent_fp8,
      fp8_room(n_tokens, config.q_lora_rank, device, numerics,
               {&weights.wq_b, weights.indexer ? &weights.indexer->wq_b : nullptr}));
  const LinearInput latent(q_latent.view(), q_latent_fp8.view());
  DSV4_ASSIGN_OR_RETURN(
      Tensor q, Tensor::empty(DType::kF32, {n_tokens, config.n_head, config.head_dim}, device));
  DSV4_RETURN_IF_ERROR(
      project_query(config, weights, in, at.positions, inv_freq, latent, q.view(), numerics));
  DSV4_ASSIGN_OR_RETURN(Tensor kv,
                        project_kv(config, weights, in, at.positions, inv_freq, numerics));
  IndexerQueries index;
  if (weights.indexer) {
    DSV4_ASSIGN_OR_RETURN(index, indexer_queries(config, *weights.indexer, x, latent, at.positions,
                                                 inv_freq, numerics));
  }
  // Several sequences, or a prompt longer than Ts: each compressor's projections once for all
  // rows (a sequence's rows are copied into its cache), so its weights are read once a step, not
  // once a sequence or a piece. Decode rows take them from there too (their compressor step
  // reads them from a table). A single prompt of one piece projects straight into its cache.
  const SequenceRows& front = sequences.front();
  const bool projects = sequences.size() > 1 || is_decode_run(front) ||
                        front.end - front.begin > front.cache->max_step_tokens;
  std::optional<CompressorRows> compressor_rows, index_compressor_rows;
  if (projects && weights.compressor) {
    DSV4_ASSIGN_OR_RETURN(compressor_rows,
                          project_compressor_rows(*weights.compressor, x, numerics));
  }
  if (projects && weights.indexer) {
    DSV4_ASSIGN_OR_RETURN(index_compressor_rows,
                          project_compressor_rows(weights.indexer->compressor, x, numerics));
  }
  DSV4_ASSIGN_OR_RETURN(Tensor o, Tensor::empty(DType::kF32, q.shape(), device));
  // V = K carried the keys' rotation into the output; it is undone at the query's position, and
  // where wo_a runs the FP8 GEMM o is quantized for it in the same launch: the fast attention's
  // own where it can (attention_makes_fp8), else rope or rope_fp8 after every call.
  const int64_t o_width = config.n_head * config.head_dim;
  DSV4_ASSIGN_OR_RETURN(
      const Fp8Room o_fp8,
      block_diagonal_fp8_room(n_tokens, o_width, device, numerics, weights.wo_a, config.o_groups));
  const bool attention_quantizes = !o_fp8.empty() && attention_makes_fp8(config, device, numerics);
  const StepRows rows{
      x,
      q.view(),
      kv.view(),
      at.window_rows,
      at.positions,
      at.host,
      inv_freq,
      index.q.view(),
      index.weights.view(),
      compressor_rows ? &*compressor_rows : nullptr,
      index_compressor_rows ? &*index_compressor_rows : nullptr,
      attention_quantizes ? LinearInput(o.view(), o_fp8.view()) : LinearInput(o.view()),
      at.capacity_entry_ids,
      numerics};
  int64_t column = 0;  // the first of sequence i in `addresses` (address_columns)
  for (size_t i = 0; i < sequences.size();) {
    const SequenceRows& seq = sequences[i];
    if (!is_decode_run(seq)) {
      DSV4_RETURN_IF_ERROR(attend_prompt(config, weights, rows, seq));
      ++i;
      ++column;
      continue;
    }
    // A run of decode rows (the running batch puts them first) goes in one launch an op, as
    // long as their rings have one size (a cache made with another step size starts a run).
    size_t end = i + 1;
    while (end < sequences.size() && is_decode_run(sequences[end]) &&
           sequences[end].cache->window.shape() == seq.cache->window.shape()) {
      ++end;
    }
    const std::span<const SequenceRows> run = sequences.subspan(i, end - i);
    if (addresses.empty()) {
      DSV4_ASSIGN_OR_RETURN(const StepAddresses made, StepAddresses::of(run, device));
      DSV4_RETURN_IF_ERROR(attend_decode_rows(config, weights, rows, run, made, 0));
    } else {
      DSV4_RETURN_IF_ERROR(attend_decode_rows(config, weights, rows, run, addresses, column));
    }
    column += run.back().end - run.front().begin;
    i = end;
  }
  if (o_fp8.empty()) {
    DSV4_RETURN_IF_ERROR(
        kernels::rope(o.view(), at.positions, inv_freq, kernels::RopeDirection::kInverse));
  } else if (!attention_quantizes) {
    DSV4_RETURN_IF_ERROR(kernels::rope_fp8(o.view(), at.positions, inv_freq,
                                           kernels::RopeDirection::kInverse, o_fp8.view()));
  }
  return project_output(config, weights,
                        LinearInput(o.view().reshaped({n_tokens, o_width}), o_fp8.view()), out,
                        numerics);
}

Status check_sequence(const checkpoint::ModelConfig& config, int64_t layer, int64_t n_tokens,
                      int64_t start_pos, const AttentionCache& cache) {
  DSV4_CHECK(
      cache.compressor.has_value() == (config.schedule(layer).attention != AttentionType::kSliding),
      "attention_forward: cache of another layer type");
  if (start_pos != cache.n_tokens) {
    return invalid_argument("attention layer " + std::to_string(layer) + ": start_pos " +
                            std::to_string(start_pos) + ", but the cache holds " +
                            std::to_string(cache.n_tokens) + " tokens");
  }
  if (start_pos + n_tokens > cache.max_positions) {
    return resource_exhausted("attention layer " + std::to_string(layer) + ": " +
                              std::to_string(start_pos + n_tokens) + " tokens, cache holds " +
                              std::to_string(cache.max_positions));
  }
  return ok_status();
}

}  // namespace

bool is_decode_run(const SequenceRows& seq) {
  const int64_t n = seq.end - seq.begin;
  return n >= 1 && n <= AttentionCache::kMaxDecodeRun && n <= seq.cache->max_step_tokens &&
         seq.snapshot == nullptr;
}

int64_t n_columns(const SequenceRows& seq) {
  return is_decode_run(seq) ? seq.end - seq.begin : 1;
}

std::vector<AttentionCache*> address_columns(std::span<const SequenceRows> sequences) {
  std::vector<AttentionCache*> caches;
  for (const SequenceRows& seq : sequences) caches.insert(caches.end(), n_columns(seq), seq.cache);
  return caches;
}

std::vector<int64_t> cache_address_values(std::span<AttentionCache* const> caches,
                                          int64_t n_layers) {
  DSV4_CHECK(n_layers > 0 && static_cast<int64_t>(caches.size()) % n_layers == 0,
             "cache_addresses: %zu caches for %lld layers", caches.size(), (long long)n_layers);
  const int64_t n_sequences = static_cast<int64_t>(caches.size()) / n_layers;
  std::vector<int64_t> table(static_cast<size_t>(n_layers * kCacheBuffers * n_sequences), 0);
  const auto address = [](const Tensor& t) {
    return static_cast<int64_t>(reinterpret_cast<intptr_t>(t.view().data));
  };
  for (int64_t l = 0; l < n_layers; ++l) {
    for (int64_t s = 0; s < n_sequences; ++s) {
      const AttentionCache& cache = *caches[l * n_sequences + s];
      const auto put = [&](CacheBuffer buffer, int64_t value) {
        table[(l * kCacheBuffers + buffer) * n_sequences + s] = value;
      };
      put(kRing, address(cache.window));
      // A compressor's buffers from `kv_rows` on, in CacheBuffer's order; the journal's only
      // when armed (compressor_decode journals where it has an address).
      const auto put_compressor = [&](const CompressorCache& c, CacheBuffer kv_rows) {
        put(kv_rows, address(c.kv));
        put(CacheBuffer(kv_rows + 1), address(c.gate));
        put(CacheBuffer(kv_rows + 2), address(c.entries));
        if (!c.journal.armed) return;
        put(CacheBuffer(kv_rows + 3), address(c.journal.kv));
        put(CacheBuffer(kv_rows + 4), address(c.journal.gate));
      };
      if (cache.compressor) put_compressor(*cache.compressor, kKvRows);
      if (cache.indexer) put_compressor(*cache.indexer, kIndexKvRows);
    }
  }
  return table;
}

Result<Tensor> cache_addresses(std::span<AttentionCache* const> caches, int64_t n_layers,
                               Device device) {
  const int64_t n_sequences = static_cast<int64_t>(caches.size()) / n_layers;
  return upload(cache_address_values(caches, n_layers), {n_layers, kCacheBuffers, n_sequences},
                device);
}

std::vector<int32_t> window_index_values(std::span<const SequenceRows> sequences,
                                         std::span<const int64_t> positions, int64_t window) {
  std::vector<int32_t> indices(positions.size() * window);
  for (const SequenceRows& seq : sequences) {
    const int64_t n_ring = seq.cache->window.shape()[0];
    for (int64_t t = seq.begin; t < seq.end; ++t) {
      for (int64_t j = 0; j < window; ++j) {
        const int64_t pos = positions[t] - window + 1 + j;
        indices[t * window + j] = pos < 0 ? -1 : static_cast<int32_t>(pos % n_ring);
      }
    }
  }
  return indices;
}

Status check_decode_step(const checkpoint::ModelConfig& config, int64_t layer,
                         std::span<AttentionCache* const> caches,
                         std::span<const int64_t> positions) {
  DSV4_CHECK(caches.size() == positions.size(), "check_decode_step: %zu caches, %zu positions",
             caches.size(), positions.size());
  std::vector<CompressorCache*> compressors, indexers;
  for (size_t t = 0; t < caches.size(); ++t) {
    // A run's first row checks the run (its cache's count holds for that row only).
    if (t == 0 || caches[t] != caches[t - 1] || positions[t] != positions[t - 1] + 1) {
      size_t end = t + 1;
      while (end < caches.size() && caches[end] == caches[t] &&
             positions[end] == positions[end - 1] + 1) {
        ++end;
      }
      DSV4_RETURN_IF_ERROR(
          check_sequence(config, layer, static_cast<int64_t>(end - t), positions[t], *caches[t]));
    }
    if (caches[t]->compressor) compressors.push_back(&*caches[t]->compressor);
    if (caches[t]->indexer) indexers.push_back(&*caches[t]->indexer);
  }
  if (!compressors.empty()) DSV4_RETURN_IF_ERROR(check_decode_slots(compressors, positions));
  if (!indexers.empty()) DSV4_RETURN_IF_ERROR(check_decode_slots(indexers, positions));
  return ok_status();
}

void advance_decode_step(std::span<AttentionCache* const> caches,
                         std::span<const int64_t> positions) {
  for (size_t t = 0; t < caches.size(); ++t) {
    AttentionCache& cache = *caches[t];
    const std::span<const int64_t> at = positions.subspan(t, 1);
    for (std::optional<CompressorCache>* c : {&cache.compressor, &cache.indexer}) {
      CompressorCache* compressor = c->has_value() ? &**c : nullptr;
      if (compressor) advance_decode_slots(std::span(&compressor, 1), at);
    }
    ++cache.n_tokens;
  }
}

Result<RowPositions> RowPositions::of(const checkpoint::ModelConfig& config,
                                      std::span<const SequenceRows> sequences, int64_t n_rows,
                                      Device device, std::shared_ptr<const RopeTables> rope) {
  RowPositions at;
  if (rope == nullptr) {
    DSV4_ASSIGN_OR_RETURN(RopeTables made, RopeTables::create(config, device));
    rope = std::make_shared<const RopeTables>(std::move(made));
  }
  at.rope = std::move(rope);
  at.host.assign(n_rows, 0);
  for (const SequenceRows& seq : sequences) {
    DSV4_CHECK(seq.cache != nullptr && 0 <= seq.begin && seq.begin <= seq.end && seq.end <= n_rows,
               "RowPositions: rows [%lld, %lld) of %lld", (long long)seq.begin, (long long)seq.end,
               (long long)n_rows);
    for (int64_t t = seq.begin; t < seq.end; ++t) at.host[t] = seq.start_pos + t - seq.begin;
    at.n_ring_rows.push_back(seq.cache->window.shape()[0]);
  }
  DSV4_ASSIGN_OR_RETURN(at.positions, upload(at.host, {n_rows}, device));
  DSV4_ASSIGN_OR_RETURN(at.window_rows,
                        window_indices(sequences, at.host, config.sliding_window, device));
  return at;
}

Status attention_forward(const checkpoint::ModelConfig& config, int64_t layer,
                         const checkpoint::AttentionWeights& weights, const TensorView& x,
                         std::span<const SequenceRows> sequences, const TensorView& out,
                         Numerics numerics) {
  DSV4_ASSIGN_OR_RETURN(RowPositions at, RowPositions::of(config, sequences, x.size(0), x.device));
  return attention_forward(config, layer, weights, x, sequences, at, out, numerics);
}

Status attention_forward(const checkpoint::ModelConfig& config, int64_t layer,
                         const checkpoint::AttentionWeights& weights, const TensorView& x,
                         std::span<const SequenceRows> sequences, const RowPositions& at,
                         const TensorView& out, Numerics numerics,
                         const kernels::Fp8Activation& x_fp8) {
  const LinearInput input(x, x_fp8);
  DSV4_CHECK(layer >= 0 && layer < config.n_blocks(), "layer %lld", (long long)layer);
  DSV4_CHECK(x.dtype == DType::kF32 && x.rank() == 2 && x.size(1) == config.hidden_size &&
                 x.is_contiguous() && out.shape == x.shape && out.is_contiguous(),
             "attention_forward: x and out must be f32 [T, D]");
  DSV4_CHECK(at.n_ring_rows.size() == sequences.size() &&
                 static_cast<int64_t>(at.host.size()) == x.size(0),
             "attention_forward: positions of %zu sequences and %zu rows for %zu and %lld",
             at.n_ring_rows.size(), at.host.size(), sequences.size(), (long long)x.size(0));
  DSV4_CHECK(at.rope != nullptr, "attention_forward: positions without RoPE tables");
  const StepPositions all{at.host, at.positions.view(), at.window_rows.view(),
                          at.capacity_entry_ids, at.rope->of_layer(config, layer)};
  std::vector<SequenceRows> batch;
  std::vector<int64_t> index;   // of each in `sequences`
  std::vector<int64_t> column;  // of each: its first column of at.cache_addresses
  int64_t next = 0, next_column = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const SequenceRows& seq = sequences[i];
    DSV4_CHECK(seq.begin == next && seq.begin <= seq.end && seq.cache != nullptr,
               "attention_forward: rows [%lld, %lld) do not continue at %lld", (long long)seq.begin,
               (long long)seq.end, (long long)next);
    next = seq.end;
    const int64_t seq_column = std::exchange(next_column, next_column + n_columns(seq));
    if (seq.begin == seq.end) continue;
    DSV4_RETURN_IF_ERROR(
        check_sequence(config, layer, seq.end - seq.begin, seq.start_pos, *seq.cache));
    DSV4_CHECK(seq.cache->window.shape()[0] == at.n_ring_rows[i],
               "attention_forward: layer %lld's ring of %lld rows, positions made for %lld",
               (long long)layer, (long long)seq.cache->window.shape()[0],
               (long long)at.n_ring_rows[i]);
    batch.push_back(seq);
    index.push_back(static_cast<int64_t>(i));
    column.push_back(seq_column);
  }
  DSV4_CHECK(next == x.size(0), "attention_forward: the sequences hold %lld of %lld rows",
             (long long)next, (long long)x.size(0));
  if (batch.empty()) return ok_status();
  // One step for every sequence with rows: the projections on all of them at once, whatever
  // their lengths (a long prompt's attention then runs Ts rows at a time, attend_prompt). The
  // forward's addresses serve sequences with no empty one between them.
  const bool consecutive = index.back() - index.front() == static_cast<int64_t>(batch.size() - 1);
  const StepAddresses addresses =
      at.cache_addresses.numel() > 0 && consecutive
          ? StepAddresses(at.cache_addresses, layer - at.first_address_layer, column.front())
          : StepAddresses();
  const int64_t begin = batch.front().begin, end = batch.back().end;
  for (SequenceRows& seq : batch) {
    seq.begin -= begin;
    seq.end -= begin;
  }
  return attention_step(config, weights, input.rows(begin, end), batch, all.rows(begin, end),
                        addresses, out.rows(begin, end), numerics);
}

Status attention_forward(const checkpoint::ModelConfig& config, int64_t layer,
                         const checkpoint::AttentionWeights& weights, const TensorView& x,
                         int64_t start_pos, AttentionCache& cache, const TensorView& out) {
  const SequenceRows seq{0, x.size(0), start_pos, &cache};
  return attention_forward(config, layer, weights, x, std::span<const SequenceRows>(&seq, 1), out);
}

}  // namespace dsv4::model
