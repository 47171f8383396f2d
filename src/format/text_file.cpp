#include "format/text_file.h"

#include <fstream>
#include <sstream>

namespace dsv4::format {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Status write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return internal_error(path + ": write failed");
  return ok_status();
}

}  // namespace dsv4::format
