#include "cli/compare_reference.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"

namespace qserve::cli {
namespace {

constexpr const char* kFormat = "qserve-compare-reference-1";

void fnv_bytes(uint64_t& h, const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(p[i])) * 0x100000001b3ull;
}

void fnv_file(uint64_t& h, const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(ErrorCode::kNotFound, "cannot read '{}'", file.string());
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    fnv_bytes(h, buf.data(), static_cast<size_t>(in.gcount()));
  }
}

}  // namespace

std::string content_fingerprint(const std::string& path) {
  namespace fs = std::filesystem;
  uint64_t h = 0xcbf29ce484222325ull;
  if (fs::is_directory(path)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const std::string name = f.filename().string();
      fnv_bytes(h, name.data(), name.size() + 1);
      fnv_file(h, f);
    }
  } else {
    fnv_file(h, path);
  }
  return fmt::format("{:016x}", h);
}

void save_reference(const std::string& file, const nlohmann::json& key, const ReferenceRuns& rr) {
  nlohmann::json j = {{"format", kFormat},      {"key", key},         {"windows", rr.windows},
                      {"top1", rr.top1},        {"nll", rr.nll},      {"prompt_ids", rr.prompt_ids},
                      {"greedy", rr.greedy},    {"margins", rr.margins}, {"controls", rr.controls}};
  std::ofstream out(file);
  if (!out) fail(ErrorCode::kNotFound, "cannot write the reference file '{}'", file);
  out << j.dump() << "\n";
  if (!out) fail(ErrorCode::kInternal, "writing the reference file '{}' failed", file);
}

ReferenceRuns load_reference(const std::string& file, const nlohmann::json& key) {
  std::ifstream in(file);
  if (!in) fail(ErrorCode::kNotFound, "cannot read the reference file '{}'", file);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorruptData, "reference file '{}': {}", file, e.what());
  }
  if (!j.is_object() || j.value("format", "") != kFormat)
    fail(ErrorCode::kCorruptData, "'{}' is not a reference file of this version (format {})", file, kFormat);
  const nlohmann::json& have = j["key"];
  for (const auto& [name, want] : key.items()) {
    if (!have.contains(name) || have[name] != want)
      fail(ErrorCode::kInvalidArgument, "reference file '{}' was made for another {}: {} (this run: {})", file, name,
           have.contains(name) ? have[name].dump() : "none", want.dump());
  }
  ReferenceRuns rr;
  try {
    rr.windows = j.at("windows").get<std::vector<std::vector<int32_t>>>();
    rr.top1 = j.at("top1").get<std::vector<std::vector<int32_t>>>();
    rr.nll = j.at("nll").get<std::vector<std::vector<double>>>();
    rr.prompt_ids = j.at("prompt_ids").get<std::vector<std::vector<int32_t>>>();
    rr.greedy = j.at("greedy").get<std::vector<std::vector<int32_t>>>();
    rr.margins = j.at("margins").get<std::vector<std::vector<float>>>();
    rr.controls = j.at("controls").get<std::vector<nlohmann::json>>();
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorruptData, "reference file '{}': {}", file, e.what());
  }
  if (rr.top1.size() != rr.windows.size() || rr.nll.size() != rr.windows.size() ||
      rr.greedy.size() != rr.prompt_ids.size() || rr.margins.size() != rr.greedy.size())
    fail(ErrorCode::kCorruptData, "reference file '{}': inconsistent sizes", file);
  for (size_t w = 0; w < rr.windows.size(); ++w)
    if (rr.top1[w].size() != rr.windows[w].size() || rr.nll[w].size() + 1 != rr.windows[w].size())
      fail(ErrorCode::kCorruptData, "reference file '{}': window {} has inconsistent sizes", file, w);
  for (size_t p = 0; p < rr.greedy.size(); ++p)
    if (rr.margins[p].size() != rr.greedy[p].size())
      fail(ErrorCode::kCorruptData, "reference file '{}': greedy run {} has inconsistent sizes", file, p);
  return rr;
}

}  // namespace qserve::cli
