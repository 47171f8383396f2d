// ServerMetrics and the access log line (server/server_metrics.h): requests counted by route and
// status with unknown paths as "other", the engine's numbers in Prometheus' text format.
#include "server/server_metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace dsv4::server {
namespace {

TEST(ServerMetricsTest, CountsByRouteAndStatusAndPrintsTheEngine) {
  ServerMetrics metrics;
  metrics.add_route("/v1/completions");
  metrics.record("/v1/completions", 200);
  metrics.record("/v1/completions", 200);
  metrics.record("/../../etc/passwd", 404);
  metrics.record("/wp-admin", 404);
  const std::string text = metrics.prometheus({.running = 2,
                                               .waiting = 1,
                                               .steps = 9,
                                               .prompt_tokens = 30,
                                               .cached_prompt_tokens = 70,
                                               .prefix_cache_bytes = 4096,
                                               .generated_tokens = 12,
                                               .finished = 4,
                                               .drafted_tokens = 6,
                                               .accepted_tokens = 5,
                                               .drafted_at = {4, 2},
                                               .accepted_at = {4, 1},
                                               .decode_graphs = 3,
                                               .decode_graph_bytes = 1 << 20,
                                               .decode_graph_captures = 7,
                                               .decode_graph_planned_batch = 8,
                                               .decode_graph_planned_bytes = 3 << 20,
                                               .max_step_tokens = 2048,
                                               .step_planned_bytes = 5 << 20});
  for (const char* line :
       {"dsv4_http_requests_total{path=\"/v1/completions\",status=\"200\"} 2\n",
        "dsv4_http_requests_total{path=\"other\",status=\"404\"} 2\n",
        "# TYPE dsv4_sequences_running gauge\ndsv4_sequences_running 2\n",
        "dsv4_sequences_waiting 1\n",
        "dsv4_steps_total 9\n",
        "dsv4_prompt_tokens_total 30\n",
        "dsv4_cached_prompt_tokens_total 70\n",
        "dsv4_prefix_cache_bytes 4096\n",
        "dsv4_generated_tokens_total 12\n",
        "dsv4_sequences_finished_total 4\n",
        "dsv4_drafted_tokens_total 6\n",
        "dsv4_accepted_tokens_total 5\n",
        "# TYPE dsv4_drafted_tokens_by_position_total counter\n"
        "dsv4_drafted_tokens_by_position_total{position=\"1\"} 4\n"
        "dsv4_drafted_tokens_by_position_total{position=\"2\"} 2\n",
        "dsv4_accepted_tokens_by_position_total{position=\"2\"} 1\n",
        "# TYPE dsv4_decode_graphs gauge\ndsv4_decode_graphs 3\n",
        "dsv4_decode_graph_bytes 1048576\n",
        "# TYPE dsv4_decode_graph_captures_total counter\ndsv4_decode_graph_captures_total 7\n",
        "# TYPE dsv4_decode_graph_planned_bytes gauge\ndsv4_decode_graph_planned_bytes 3145728\n",
        "# TYPE dsv4_decode_graph_planned_batch gauge\ndsv4_decode_graph_planned_batch 8\n",
        "# TYPE dsv4_max_step_tokens gauge\ndsv4_max_step_tokens 2048\n",
        "# TYPE dsv4_step_planned_bytes gauge\ndsv4_step_planned_bytes 5242880\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " not in\n" << text;
  }
  EXPECT_EQ(text.find("passwd"), std::string::npos);
}

TEST(ServerMetricsTest, AccessLogLine) {
  ServerMetrics metrics;
  metrics.add_route("/v1/completions");
  EXPECT_EQ(access_log_line("POST", metrics.route_of("/v1/completions"), 200, 123,
                            std::chrono::microseconds(1500)),
            "POST /v1/completions 200 123 B 1.5 ms");
  EXPECT_EQ(
      access_log_line("GET", metrics.route_of("/admin"), 404, 0, std::chrono::milliseconds(2)),
      "GET other 404 0 B 2.0 ms");
}

}  // namespace
}  // namespace dsv4::server
