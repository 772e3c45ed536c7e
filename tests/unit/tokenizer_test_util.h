// Shared helpers of the tokenizer tests: where the data is, and the check of a
// tokenizer against a reference dumped by scripts/dump_tokenizer_reference.py.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace qserve::test {

// ../shared/data (QSERVE_SHARED_DATA_DIR in the environment overrides the build's).
inline std::string shared_data_dir() {
  if (const char* e = std::getenv("QSERVE_SHARED_DATA_DIR")) return e;
  return QSERVE_SHARED_DATA_DIR;
}

inline std::string tokenizer_data_dir() { return std::string(QSERVE_SOURCE_DIR) + "/tests/data/tokenizer"; }

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t e = s.find('\n'); e != std::string::npos; e = s.find('\n', b)) {
    out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  out.push_back(s.substr(b));
  return out;
}

inline std::string fnv1a64(const std::vector<int32_t>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);
    for (int k = 0; k < 4; ++k) {
      h ^= (u >> (8 * k)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

inline std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

// The crafted strings: ids with and without special tokens, decoded text.
inline void check_crafted(const Tokenizer& tok, const nlohmann::json& ref, bool check_decoded_plain) {
  for (const auto& c : ref.at("crafted")) {
    const std::string text = c.at("text").get<std::string>();
    const auto ids = tok.encode(text, true);
    const auto plain = tok.encode(text, false);
    EXPECT_EQ(ids_str(ids), ids_str(c.at("ids").get<std::vector<int32_t>>())) << "\"" << text << "\"";
    EXPECT_EQ(ids_str(plain), ids_str(c.at("ids_plain").get<std::vector<int32_t>>())) << "\"" << text << "\"";
    const auto ref_ids = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(ref_ids, true), c.at("decoded_skip").get<std::string>()) << "\"" << text << "\"";
    if (check_decoded_plain && c.contains("decoded")) {
      EXPECT_EQ(tok.decode(c.at("ids_plain").get<std::vector<int32_t>>(), false), c.at("decoded").get<std::string>())
          << "\"" << text << "\"";
    }
  }
}

// Encodes every case of `ref` and compares with the reference ids; checks
// decode(encode(x)) == x wherever the reference library round-trips.
// check_decoded_plain: compare decode(ids, skip_special=false) on crafted cases.
inline void check_against_reference(const Tokenizer& tok, const nlohmann::json& ref, bool check_decoded_plain) {
  const std::string text_dir = shared_data_dir() + "/text";
  EXPECT_EQ(tok.vocab_size(), ref.at("vocab_size").get<int32_t>());
  check_crafted(tok, ref, check_decoded_plain);
  std::vector<std::vector<std::string>> files;
  for (const auto& name : ref.at("files")) {
    const std::string path = text_dir + "/" + name.get<std::string>();
    if (!std::filesystem::exists(path))
      GTEST_SKIP() << "skipped: " << path << " not found (shared data absent); crafted cases passed";
    files.push_back(split_lines(read_file(path)));
  }
  auto text_of = [&](const nlohmann::json& c) {
    const auto& lines = files.at(c[0].get<size_t>());
    const size_t first = c[1].get<size_t>(), count = c[2].get<size_t>();
    std::string t;
    for (size_t k = 0; k < count; ++k) t += (k ? "\n" : "") + lines.at(first + k);
    return t;
  };
  int id_failures = 0, roundtrip_failures = 0, checked = 0;
  for (const auto& c : ref.at("cases")) {
    const std::string text = text_of(c);
    const auto ids = tok.encode(text, /*add_special=*/false);
    ++checked;
    if (static_cast<int64_t>(ids.size()) != c[3].get<int64_t>() || fnv1a64(ids) != c[4].get<std::string>()) {
      if (++id_failures <= 5)
        ADD_FAILURE() << "ids differ for file " << c[0] << " line " << c[1] << " (+" << c[2] << "): \"" << text
                      << "\" -> " << ids_str(ids) << " (" << ids.size() << " ids, reference " << c[3] << ")";
    }
    if (c[5].get<int>() == 1 && tok.decode(ids, /*skip_special=*/true) != text) {
      if (++roundtrip_failures <= 5)
        ADD_FAILURE() << "decode(encode(x)) != x for \"" << text << "\": \"" << tok.decode(ids, true) << "\"";
    }
  }
  for (const auto& c : ref.at("full")) {
    const auto ids = tok.encode(text_of(c), false);
    EXPECT_EQ(ids, c[3].get<std::vector<int32_t>>()) << "line " << c[1];
  }
  EXPECT_EQ(id_failures, 0) << "of " << checked << " cases";
  EXPECT_EQ(roundtrip_failures, 0) << "of " << checked << " cases";
}

inline nlohmann::json load_reference(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

}  // namespace qserve::test
