#include "server/server_metrics.h"

#include <cstdio>
#include <utility>
#include <vector>

namespace dsv4::server {
namespace {

struct Metric {
  const char* name;
  const char* type;  // gauge or counter
  const char* help;
  int64_t value;
};

void metric(std::string& out, const Metric& m) {
  out += std::string("# HELP ") + m.name + " " + m.help + "\n# TYPE " + m.name + " " + m.type +
         "\n" + m.name + " " + std::to_string(m.value) + "\n";
}

// One counter per draft position (1-based), none without speculative decoding.
void by_position(std::string& out, const char* name, const char* help,
                 const std::vector<int64_t>& counts) {
  if (counts.empty()) return;
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
  for (size_t i = 0; i < counts.size(); ++i) {
    out += std::string(name) + "{position=\"" + std::to_string(i + 1) + "\"} " +
           std::to_string(counts[i]) + "\n";
  }
}

}  // namespace

void ServerMetrics::add_route(std::string path) { routes_.insert(std::move(path)); }

std::string ServerMetrics::route_of(const std::string& path) const {
  return routes_.contains(path) ? path : "other";
}

void ServerMetrics::record(const std::string& path, int status) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{route_of(path), status}];
}

std::string ServerMetrics::prometheus(const EngineStats& engine) const {
  std::string out;
  const Metric metrics[] = {
      {"dsv4_sequences_running", "gauge", "Sequences in the batch being stepped.", engine.running},
      {"dsv4_sequences_waiting", "gauge", "Requests waiting for a place in the batch.",
       engine.waiting},
      {"dsv4_steps_total", "counter", "Forwards run.", engine.steps},
      {"dsv4_prompt_tokens_total", "counter", "Prompt tokens run through the model.",
       engine.prompt_tokens},
      {"dsv4_cached_prompt_tokens_total", "counter",
       "Prompt tokens taken from the prefix cache instead.", engine.cached_prompt_tokens},
      {"dsv4_prefix_cache_bytes", "gauge", "Device memory the prefix cache holds.",
       engine.prefix_cache_bytes},
      {"dsv4_generated_tokens_total", "counter", "Tokens drawn.", engine.generated_tokens},
      {"dsv4_sequences_finished_total", "counter", "Sequences that ended.", engine.finished},
      {"dsv4_drafted_tokens_total", "counter",
       "Tokens the MTP block drafted and a step verified (speculative decoding).",
       engine.drafted_tokens},
      {"dsv4_accepted_tokens_total", "counter", "Drafted tokens the model accepted.",
       engine.accepted_tokens},
      {"dsv4_decode_graphs", "gauge",
       "Captured steps held (--cuda-graph: a decode step's one a batch bucket, and "
       "speculative verify and draft steps').",
       engine.decode_graphs},
      {"dsv4_decode_graph_bytes", "gauge",
       "Device memory the captured steps hold (activations, logits, padding rows).",
       engine.decode_graph_bytes},
      {"dsv4_decode_graph_captures_total", "counter",
       "Steps captured (--cuda-graph: decode steps' all at startup, speculative steps' as "
       "their shapes are met).",
       engine.decode_graph_captures},
      {"dsv4_decode_graph_planned_bytes", "gauge",
       "Device memory the decode graphs captured at startup hold, before any request.",
       engine.decode_graph_planned_bytes},
      {"dsv4_decode_graph_planned_batch", "gauge",
       "Largest batch a decode graph captured at startup replays (0: every step eager).",
       engine.decode_graph_planned_batch},
      {"dsv4_max_step_tokens", "gauge",
       "Most tokens a forward takes (--max-step-tokens): decode tokens, then prompt chunks.",
       engine.max_step_tokens},
      {"dsv4_step_planned_bytes", "gauge",
       "Device memory a step of --max-step-tokens was planned to need, checked free at startup.",
       engine.step_planned_bytes},
  };
  for (const Metric& m : metrics) metric(out, m);
  by_position(out, "dsv4_drafted_tokens_by_position_total",
              "Drafted tokens by their place among a step's drafts.", engine.drafted_at);
  by_position(out, "dsv4_accepted_tokens_by_position_total",
              "Accepted drafted tokens by their place among a step's drafts.", engine.accepted_at);
  out +=
      "# HELP dsv4_http_requests_total HTTP requests answered.\n"
      "# TYPE dsv4_http_requests_total counter\n";
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, count] : requests_) {
    out += "dsv4_http_requests_total{path=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
  }
  return out;
}

std::string access_log_line(const std::string& method, const std::string& route, int status,
                            size_t body_bytes, std::chrono::steady_clock::duration took) {
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", std::chrono::duration<double, std::milli>(took).count());
  return method + " " + route + " " + std::to_string(status) + " " + std::to_string(body_bytes) +
         " B " + ms + " ms";
}

}  // namespace dsv4::server
