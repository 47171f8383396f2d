// Whole small text files (config.json, the shard index) read and written with errors that name
// the file. The writer truncates: callers decide beforehand whether a file may be replaced.
#pragma once

#include <string>

#include "dsv4/status.h"

namespace dsv4::format {

Result<std::string> read_text_file(const std::string& path);
Status write_text_file(const std::string& path, const std::string& text);

}  // namespace dsv4::format
