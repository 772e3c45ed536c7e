// Safetensors files (https://github.com/huggingface/safetensors):
//   [u64 little-endian N] [N bytes of JSON header] [data]
// header: {"name": {"dtype": "F16", "shape": [rows, cols], "data_offsets": [begin, end]}, ...,
//          "__metadata__": {"key": "value", ...}}   offsets are relative to the data start.
// The reader memory-maps the file and returns Tensor views whose owner keeps
// the mapping alive; the header is validated before any view is made.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace qserve {

class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws Error(kNotFound / kIo) if the file cannot
  // be read, Error(kCorruptData) naming the file (and tensor) if it is malformed.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return path_; }
  // The "__metadata__" object (string -> string); an empty object if absent.
  const nlohmann::json& metadata() const { return metadata_; }
  // Tensor names in data order (ascending offsets).
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws Error(kNotFound) naming the tensor and the file.
  const Tensor& get(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<std::string> names_;
  std::map<std::string, Tensor> tensors_;
};

// Collects tensors (views: their owners keep the data alive until write()) and
// writes one safetensors file atomically: a temporary file next to `path`, then
// rename, so a failure never leaves a partial `path` behind.
class SafetensorsWriter {
 public:
  // Throws Error(kInvalidArgument) on a duplicate or empty name.
  void add(const std::string& name, const Tensor& tensor);
  void set_metadata(const std::string& key, const std::string& value);
  size_t size() const { return entries_.size(); }
  // Throws Error(kIo) naming the path on any write failure.
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    Tensor tensor;
  };
  std::vector<Entry> entries_;  // insertion order; written largest element size first
  std::map<std::string, std::string> metadata_;
};

}  // namespace qserve
