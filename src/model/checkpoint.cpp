#include "model/checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "model/gguf_checkpoint.h"
#include "model/safetensors.h"

namespace fs = std::filesystem;

namespace qserve {

Checkpoint::Checkpoint(std::string path, nlohmann::json config, std::map<std::string, Tensor> tensors,
                       std::map<std::string, nlohmann::json> json_files, bool is_directory)
    : path_(std::move(path)),
      config_(std::move(config)),
      tensors_(std::move(tensors)),
      json_files_(std::move(json_files)),
      is_directory_(is_directory) {}

const Tensor& Checkpoint::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(ErrorCode::kNotFound, "{}: checkpoint has no tensor named '{}'", path_, name);
  return it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

std::optional<nlohmann::json> Checkpoint::json_file(const std::string& name) const {
  auto it = json_files_.find(name);
  if (it != json_files_.end()) return it->second;
  if (!is_directory_) return std::nullopt;
  const fs::path p = fs::path(path_) / name;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  return read_json_file(p.string());
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(path, ec)) fail(ErrorCode::kNotFound, "{} does not exist", path);
    fail(ErrorCode::kIo, "cannot read {}", path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorruptData, "{} is not valid JSON: {}", path, e.what());
  }
}

namespace {

// Keeps every shard's SafetensorsFile alive through the tensors' owners
// (a tensor's owner is the mapping, so the file objects themselves may go).
std::shared_ptr<Checkpoint> open_hf_directory(const std::string& dir) {
  const fs::path root(dir);
  const fs::path config_path = root / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(config_path, ec)) {
    fail(ErrorCode::kNotFound, "{} is not a model directory: no config.json", dir);
  }
  nlohmann::json config = read_json_file(config_path.string());
  if (!config.is_object()) fail(ErrorCode::kCorruptData, "{}: not a JSON object", config_path.string());

  std::map<std::string, Tensor> tensors;
  const fs::path index_path = root / "model.safetensors.index.json";
  const fs::path single_path = root / "model.safetensors";
  if (fs::is_regular_file(index_path, ec)) {
    const nlohmann::json index = read_json_file(index_path.string());
    const std::string ip = index_path.string();
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail(ErrorCode::kCorruptData, "{}: no weight_map object", ip);
    }
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) fail(ErrorCode::kCorruptData, "{}: weight_map entry of '{}' is not a file name", ip, name);
      const std::string fname = file.get<std::string>();
      if (fname.empty() || fname.find('/') != std::string::npos || fname == "." || fname == "..") {
        fail(ErrorCode::kCorruptData, "{}: '{}' is not a file name in the directory", ip, fname);
      }
      auto it = shards.find(fname);
      if (it == shards.end()) {
        const fs::path shard_path = root / fname;
        if (!fs::is_regular_file(shard_path, ec)) {
          fail(ErrorCode::kNotFound, "{}: shard {} (listed for tensor '{}') does not exist", ip, fname, name);
        }
        it = shards.emplace(fname, SafetensorsFile::open(shard_path.string())).first;
      }
      if (!it->second->has(name)) {
        fail(ErrorCode::kCorruptData, "{}: tensor '{}' is listed in {} but that file does not hold it", ip, name,
             fname);
      }
      tensors.emplace(name, it->second->get(name));
    }
    if (tensors.empty()) fail(ErrorCode::kCorruptData, "{}: weight_map is empty", ip);
  } else if (fs::is_regular_file(single_path, ec)) {
    auto file = SafetensorsFile::open(single_path.string());
    for (const auto& name : file->names()) tensors.emplace(name, file->get(name));
  } else {
    fail(ErrorCode::kNotFound, "{}: no model.safetensors or model.safetensors.index.json", dir);
  }
  return std::make_shared<Checkpoint>(dir, std::move(config), std::move(tensors));
}

bool has_gguf_magic(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char magic[4] = {0, 0, 0, 0};
  const size_t n = std::fread(magic, 1, 4, f);
  std::fclose(f);
  return n == 4 && magic[0] == 'G' && magic[1] == 'G' && magic[2] == 'U' && magic[3] == 'F';
}

}  // namespace

std::shared_ptr<Checkpoint> open_checkpoint(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) fail(ErrorCode::kNotFound, "model path {} does not exist", path);
  if (fs::is_directory(status)) return open_hf_directory(path);
  if (fs::path(path).extension() == ".gguf" || has_gguf_magic(path)) return open_gguf_checkpoint(path);
  fail(ErrorCode::kUnsupported, "{}: not a model directory (config.json + safetensors) or a .gguf file", path);
}

}  // namespace qserve
