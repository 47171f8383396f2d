#include "model/cache_rollback.h"

#include <algorithm>
#include <utility>

namespace dsv4::model {
namespace {

Status arm(CompressorCache& cache) {
  CompressorJournal& journal = cache.journal;
  if (journal.kv.empty_tensor()) {
    // The longest stream of a decode run: the rows kept before it (CSA: the previous block and
    // m − 1 of the current one), then the run's.
    const int64_t n_lead = cache.overlap ? cache.ratio : 0;
    const Shape shape{n_lead + cache.ratio + AttentionCache::kMaxDecodeRun, cache.kv.shape()[1]};
    DSV4_ASSIGN_OR_RETURN(journal.kv, Tensor::empty(DType::kF32, shape, cache.kv.device()));
    DSV4_ASSIGN_OR_RETURN(journal.gate, Tensor::empty(DType::kF32, shape, cache.kv.device()));
  }
  journal.armed = true;
  journal.n_rows = cache.n_rows;
  journal.n_entries = cache.n_entries;
  journal.n_fed = 0;
  journal.pooled = false;
  return ok_status();
}

// Drops the last n_drop tokens of the compressor's last (armed) step.
Status roll_back_compressor(CompressorCache& cache, int64_t n_drop, BlockCopies* copies) {
  CompressorJournal& journal = cache.journal;
  const bool armed = std::exchange(journal.armed, false);
  if (n_drop == 0) return ok_status();
  DSV4_CHECK(armed, "rolling back a compressor step that was not armed");
  if (!journal.pooled) {  // nothing pooled: the new rows sit behind the old ones
    DSV4_CHECK(cache.n_rows - n_drop >= journal.n_rows, "rollback of %lld rows past the step",
               (long long)n_drop);
    cache.n_rows -= n_drop;
    return ok_status();
  }
  // The stream as the accepted tokens alone would have left it: its complete windows pooled
  // (those entries were pooled from the same rows, so they stand), its rows from the last one on.
  const int64_t n_stream = journal.n_stream() - n_drop;
  DSV4_CHECK(n_stream >= journal.n_rows, "rollback of %lld rows past the step", (long long)n_drop);
  const int64_t n_lead = cache.overlap ? cache.ratio : 0;
  const int64_t n_windows = std::max<int64_t>(n_stream - n_lead, 0) / cache.ratio;
  const int64_t keep_from = n_windows * cache.ratio;
  cache.n_entries = journal.n_entries + n_windows;
  cache.n_rows = n_stream - keep_from;
  BlockCopies here;
  BlockCopies& to = copies != nullptr ? *copies : here;
  to.add(cache.kv.view().rows(0, cache.n_rows), journal.kv.view().rows(keep_from, n_stream));
  to.add(cache.gate.view().rows(0, cache.n_rows), journal.gate.view().rows(keep_from, n_stream));
  return here.run();
}

}  // namespace

Status CompressorJournal::record(const TensorView& stream_kv, const TensorView& stream_gate) {
  DSV4_CHECK(!pooled && stream_kv.size(0) == n_stream(), "one armed compressor step pooled twice");
  if (kv.empty_tensor() || kv.shape()[0] < stream_kv.size(0)) {
    DSV4_ASSIGN_OR_RETURN(kv, Tensor::empty(DType::kF32, stream_kv.shape, stream_kv.device));
    DSV4_ASSIGN_OR_RETURN(gate, Tensor::empty(DType::kF32, stream_gate.shape, stream_gate.device));
  }
  pooled = true;
  DSV4_RETURN_IF_ERROR(copy_tensor(kv.view().rows(0, stream_kv.size(0)), stream_kv));
  return copy_tensor(gate.view().rows(0, stream_gate.size(0)), stream_gate);
}

Status arm_rollback(AttentionCache& cache) {
  if (cache.compressor) DSV4_RETURN_IF_ERROR(arm(*cache.compressor));
  if (cache.indexer) DSV4_RETURN_IF_ERROR(arm(*cache.indexer));
  return ok_status();
}

Status arm_rollback(SequenceCache& cache) {
  for (AttentionCache& layer : cache.layers) DSV4_RETURN_IF_ERROR(arm_rollback(layer));
  return ok_status();
}

Status roll_back(AttentionCache& cache, int64_t n_tokens, BlockCopies* copies) {
  const int64_t n_drop = cache.n_tokens - n_tokens;
  DSV4_CHECK(n_drop >= 0 && n_drop < cache.max_step_tokens,
             "rollback from %lld to %lld tokens: past the last step", (long long)cache.n_tokens,
             (long long)n_tokens);
  cache.n_tokens = n_tokens;
  for (CompressorCache* c : {cache.compressor ? &*cache.compressor : nullptr,
                             cache.indexer ? &*cache.indexer : nullptr}) {
    if (c != nullptr) DSV4_RETURN_IF_ERROR(roll_back_compressor(*c, n_drop, copies));
  }
  return ok_status();
}

Status roll_back(SequenceCache& cache, int64_t n_tokens, BlockCopies* copies) {
  for (AttentionCache& layer : cache.layers) {
    DSV4_RETURN_IF_ERROR(roll_back(layer, n_tokens, copies));
  }
  return ok_status();
}

}  // namespace dsv4::model
