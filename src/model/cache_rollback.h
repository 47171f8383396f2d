// Speculative decoding's undo: a verify step feeds a sequence its next token and k drafted ones,
// and the drafts the sampler rejects must leave no trace in any cache. Arm the caches before the
// step; after it, roll_back leaves each layer exactly as if only the sequence's first n tokens
// had ever been fed (n at least what it held before the step), without copying the cache:
//   - the window ring needs only its token count: a ring of W + Ts − 1 rows (Ts ≥ the step's
//     tokens) holds the last W positions and the step's rows, so a rejected position's row lands
//     where no position that a later window reads had been, and is rewritten before any read;
//   - a compressor that pooled no block in the step kept the new rows in place behind the old:
//     it drops the rejected ones; one that pooled has its stream journaled (compressor_journal.h)
//     and takes back the pooled entries the accepted tokens did not complete and the rows the
//     kept stream ends with. Entries past the count are dead rows that later pools rewrite.
#pragma once

#include <cstdint>

#include "dsv4/status.h"
#include "model/attention_cache.h"
#include "model/deepseek_v4.h"
#include "model/gather_views.h"

namespace dsv4::model {

// Before a verify step: every compressor records what a rollback of this step needs. The first
// arming of a cache allocates its journals' buffers (compressor_journal.h), for steps of up to
// AttentionCache::kMaxDecodeRun tokens (a longer step's journal grows its own); fails only when
// that allocation does.
Status arm_rollback(AttentionCache& cache);
Status arm_rollback(SequenceCache& cache);

// After it: the state after the first n_tokens tokens (between the count before the step and
// the count now), the journals cleared. n_tokens equal to the count now keeps the whole step.
// With `copies`, the copies back from the journals are added there, for the caller to run
// (BlockCopies::run: every sequence's in one launch) before the cache is read; without, they are
// made here. Fails only when a device copy does.
Status roll_back(AttentionCache& cache, int64_t n_tokens, BlockCopies* copies = nullptr);
Status roll_back(SequenceCache& cache, int64_t n_tokens, BlockCopies* copies = nullptr);

}  // namespace dsv4::model
