// GGUF files (llama.cpp), versions 2 and 3, memory-mapped:
//   "GGUF" u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x (string key, u32 value type, value),   strings are u64 length + bytes
//   tensor_count x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset),
//   padding to general.alignment (default 32), then the tensor data.
// ne[0] is the fastest-varying dimension: a ggml [ne0, ne1] matrix is a
// row-major [ne1, ne0] tensor. Everything is validated on open (counts and
// lengths against the file size, overflow-safe sizes, offsets aligned and
// within the file, no overlaps); errors are Error(kCorruptData) naming the file.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"
#include "model/gguf_types.h"

namespace qserve {

enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// One metadata value. Numbers, bools and strings (raw bytes, not checked for
// UTF-8) live in `value`; arrays are JSON arrays, `element_type` says of what.
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  GgufValueType element_type = GgufValueType::kU8;  // arrays only
  nlohmann::json value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order: ne[0] fastest
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the data section start
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // inside the mapping
  // Row-major shape: ne reversed.
  std::vector<int64_t> shape() const;
  uint64_t numel() const;
};

class GgufFile {
 public:
  static std::shared_ptr<GgufFile> open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  // Typed getters: Error(kCorruptData) naming the key if the type does not fit;
  // the *_or variants return `fallback` when the key is absent.
  std::string get_string(const std::string& key) const;
  std::optional<std::string> get_string_opt(const std::string& key) const;
  uint64_t get_uint_or(const std::string& key, uint64_t fallback) const;
  double get_float_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  // An array value (Error if absent or not an array).
  const nlohmann::json& get_array(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // The tensor as a model loads it: F32, F16, BF16 and the block formats of
  // core/dtype.h as they are stored, a view of the mapped file (a copy where
  // the data is not aligned for its type): exact, and 2-7x fewer bytes than F32
  // for the CPU backend, which multiplies 16-bit and block weights as they
  // are; the other backends widen them on upload. Other types: Error
  // (kUnsupported) naming the tensor and type.
  Tensor load(const GgufTensorInfo& info) const;
  // load(), widened to a new F32 tensor (to_f32).
  Tensor dequantize(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace qserve
