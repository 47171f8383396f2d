// Copying a sequence's attention state into another cache, for prefix caching: a sequence whose
// tokens begin with another's continues from a copy of that one's state instead of recomputing
// it. What is copied is exactly what later steps read (attention_cache.h): the window's last W
// rows, each compressor's unpooled rows and its entries, and the token count. The window ring
// and the entry capacity may differ in size between the two caches (a snapshot's are the
// smallest that hold the state), so the copy moves rows by position, not by slot.
#pragma once

#include <cstdint>

#include "model/attention_cache.h"

namespace dsv4::model {

// `to` takes `from`'s state, as if it had run from's tokens. Both serve the same layer of the
// same model; `to` must hold at least from.n_tokens positions. invalid_argument otherwise, with
// `to` unchanged.
Status copy_cache_state(const AttentionCache& from, AttentionCache& to);
// Every layer's.
Status copy_cache_state(const SequenceCache& from, SequenceCache& to);

// Device bytes the cache's tensors hold.
int64_t cache_bytes(const SequenceCache& cache);

}  // namespace dsv4::model
