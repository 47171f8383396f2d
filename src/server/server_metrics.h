// What the server counts for GET /metrics (Prometheus' text format, version 0.0.4): the engine's
// gauges and totals (EngineStats) and the HTTP requests answered, by route and status. Paths
// outside the server's routes count as "other", so a scanner cannot grow the label set.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "dsv4/engine.h"

namespace dsv4::server {

class ServerMetrics {
 public:
  // The server's routes, each added as it is registered (before the server answers requests).
  void add_route(std::string path);
  // `path` itself when it is a route, else "other".
  std::string route_of(const std::string& path) const;
  // One request answered with `status`.
  void record(const std::string& path, int status);
  // The exposition text.
  std::string prometheus(const EngineStats& engine) const;

 private:
  std::set<std::string> routes_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (route, status) -> count
};

// One access-log line: method, route (ServerMetrics::route_of), status, response bytes and
// milliseconds taken.
std::string access_log_line(const std::string& method, const std::string& route, int status,
                            size_t body_bytes, std::chrono::steady_clock::duration took);

}  // namespace dsv4::server
