// Speculative decoding's acceptance (EngineStats' drafted and accepted tokens) as one line, for
// dsv4 bench and generate --speculative.
#pragma once

#include <string>

#include "dsv4/engine.h"

namespace dsv4::tools {

// "193 of 312 drafts accepted (61.9%), 1.62 tokens a verify step; by position: 1: 61.9% of 312;
// drafting 0.412 ms a run (320 runs)" (position i: the steps whose first i drafts were all kept,
// of those that drafted i; a run: the MTP block's drafts of one step, all sequences).
std::string describe_acceptance(const EngineStats& stats);
// 1 + accepted drafts a verify step (1 before any).
double tokens_a_verify_step(const EngineStats& stats);

}  // namespace dsv4::tools
