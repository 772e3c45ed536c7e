#include "model/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace qserve {
namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 4;      // arrays of arrays of ...
constexpr uint64_t kMaxI64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Bounds-checked little-endian reads over the mapping; every failure names the
// file and what was being read.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, uint64_t size) : path_(path), data_(data), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  const uint8_t* take(uint64_t n, const char* what, const std::string& context) {
    if (n > remaining()) {
      fail(ErrorCode::kCorruptData, "{}: truncated: {}{} needs {} bytes at offset {}, {} left", path_, what, context,
           n, pos_, remaining());
    }
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T read(const char* what, const std::string& context = "") {
    T v;
    std::memcpy(&v, take(sizeof(T), what, context), sizeof(T));
    return v;
  }
  std::string read_string(const char* what, const std::string& context = "") {
    const uint64_t n = read<uint64_t>(what, context);
    if (n > remaining()) {
      fail(ErrorCode::kCorruptData, "{}: {}{}: string length {} runs past the end of the file", path_, what, context,
           n);
    }
    const uint8_t* p = take(n, what, context);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// The smallest encoding of one element of `type`, to bound array lengths by the file size.
uint64_t min_encoded_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kBool: return 1;
    case GgufValueType::kU16: case GgufValueType::kI16: return 2;
    case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kF32: return 4;
    case GgufValueType::kU64: case GgufValueType::kI64: case GgufValueType::kF64: return 8;
    case GgufValueType::kString: return 8;
    case GgufValueType::kArray: return 12;
  }
  return 1;
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kF64); }

nlohmann::json read_scalar(Cursor& c, GgufValueType type, const std::string& ctx) {
  switch (type) {
    case GgufValueType::kU8: return c.read<uint8_t>("value", ctx);
    case GgufValueType::kI8: return c.read<int8_t>("value", ctx);
    case GgufValueType::kU16: return c.read<uint16_t>("value", ctx);
    case GgufValueType::kI16: return c.read<int16_t>("value", ctx);
    case GgufValueType::kU32: return c.read<uint32_t>("value", ctx);
    case GgufValueType::kI32: return c.read<int32_t>("value", ctx);
    case GgufValueType::kF32: return c.read<float>("value", ctx);
    case GgufValueType::kBool: return c.read<uint8_t>("value", ctx) != 0;
    case GgufValueType::kString: return c.read_string("value", ctx);
    case GgufValueType::kU64: return c.read<uint64_t>("value", ctx);
    case GgufValueType::kI64: return c.read<int64_t>("value", ctx);
    case GgufValueType::kF64: return c.read<double>("value", ctx);
    case GgufValueType::kArray: break;
  }
  QS_CHECK(false) << "read_scalar on an array";
  return nullptr;
}

nlohmann::json read_value(Cursor& c, const std::string& path, GgufValueType type, const std::string& ctx, int depth,
                          GgufValueType* element_type) {
  if (type != GgufValueType::kArray) return read_scalar(c, type, ctx);
  if (depth >= kMaxArrayNesting) fail(ErrorCode::kCorruptData, "{}{}: arrays nested too deeply", path, ctx);
  const uint32_t et = c.read<uint32_t>("array type", ctx);
  if (!known_value_type(et)) fail(ErrorCode::kCorruptData, "{}{}: unknown array element type {}", path, ctx, et);
  const auto etype = static_cast<GgufValueType>(et);
  if (element_type) *element_type = etype;
  const uint64_t n = c.read<uint64_t>("array length", ctx);
  if (n > c.remaining() / min_encoded_size(etype)) {
    fail(ErrorCode::kCorruptData, "{}{}: array length {} runs past the end of the file", path, ctx, n);
  }
  nlohmann::json arr = nlohmann::json::array();
  // Capped: a corrupt length must not reserve far more memory than the file holds.
  arr.get_ref<nlohmann::json::array_t&>().reserve(std::min<uint64_t>(n, 1u << 16));
  for (uint64_t i = 0; i < n; ++i) arr.push_back(read_value(c, path, etype, ctx, depth + 1, nullptr));
  return arr;
}

}  // namespace

std::vector<int64_t> GgufTensorInfo::shape() const {
  std::vector<int64_t> s(ne.rbegin(), ne.rend());
  return s;
}

uint64_t GgufTensorInfo::numel() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;  // validated on open: no overflow
  return n;
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::shared_ptr<GgufFile> g(new GgufFile());
  g->path_ = path;
  g->file_ = MappedFile::open(path);
  Cursor c(path, g->file_->data(), g->file_->size());
  if (g->file_->size() < 4 || std::memcmp(g->file_->data(), "GGUF", 4) != 0) {
    fail(ErrorCode::kCorruptData, "{}: not a GGUF file (bad magic)", path);
  }
  c.take(4, "magic", "");
  g->version_ = c.read<uint32_t>("version");
  if (g->version_ == 1) fail(ErrorCode::kUnsupported, "{}: GGUF version 1 is not supported (only 2 and 3)", path);
  if (g->version_ != 2 && g->version_ != 3) {
    fail(ErrorCode::kCorruptData, "{}: unsupported GGUF version {} (expected 2 or 3)", path, g->version_);
  }
  const uint64_t tensor_count = c.read<uint64_t>("tensor count");
  const uint64_t kv_count = c.read<uint64_t>("metadata count");
  // Each key/value takes at least 13 bytes, each tensor info at least 28.
  if (kv_count > c.remaining() / 13) fail(ErrorCode::kCorruptData, "{}: metadata count {} exceeds the file", path, kv_count);
  if (tensor_count > c.remaining() / 28) {
    fail(ErrorCode::kCorruptData, "{}: tensor count {} exceeds the file", path, tensor_count);
  }

  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string key = c.read_string("metadata key", fmt::format(" #{}", i));
    const std::string ctx = " '" + key + "'";
    const uint32_t t = c.read<uint32_t>("metadata type", ctx);
    if (!known_value_type(t)) fail(ErrorCode::kCorruptData, "{}: metadata '{}': unknown value type {}", path, key, t);
    GgufValue v;
    v.type = static_cast<GgufValueType>(t);
    v.value = read_value(c, path, v.type, ctx, 0, &v.element_type);
    if (!g->metadata_.emplace(key, std::move(v)).second) {
      fail(ErrorCode::kCorruptData, "{}: duplicate metadata key '{}'", path, key);
    }
  }
  if (const GgufValue* a = g->find("general.alignment")) {
    if (!a->value.is_number_unsigned() || a->value.get<uint64_t>() == 0 ||
        (a->value.get<uint64_t>() & (a->value.get<uint64_t>() - 1)) != 0 || a->value.get<uint64_t>() > (1u << 30)) {
      fail(ErrorCode::kCorruptData, "{}: general.alignment {} is not a power of two", path, a->value.dump());
    }
    g->alignment_ = a->value.get<uint64_t>();
  } else {
    g->alignment_ = kDefaultAlignment;
  }

  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    info.name = c.read_string("tensor name", fmt::format(" #{}", i));
    const std::string ctx = " of tensor '" + info.name + "'";
    const uint32_t n_dims = c.read<uint32_t>("dimension count", ctx);
    if (n_dims > kMaxDims) fail(ErrorCode::kCorruptData, "{}: tensor '{}': {} dimensions (at most 4)", path, info.name, n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>("dimension", ctx);
      if (ne > kMaxI64 || __builtin_mul_overflow(numel, ne, &numel) || numel > kMaxI64) {
        fail(ErrorCode::kCorruptData, "{}: tensor '{}': dimensions overflow", path, info.name);
      }
      info.ne.push_back(ne);
    }
    const uint32_t type = c.read<uint32_t>("type", ctx);
    const auto tinfo = ggml_type_info(type);
    if (!tinfo) fail(ErrorCode::kUnsupported, "{}: tensor '{}': unknown ggml type {}", path, info.name, type);
    info.type = static_cast<GgmlType>(type);
    info.offset = c.read<uint64_t>("data offset", ctx);
    const uint64_t ne0 = info.ne.empty() ? 1 : info.ne[0];
    if (ne0 % tinfo->block_size != 0) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': row length {} is not a multiple of the {} block size {}", path,
           info.name, ne0, tinfo->name, tinfo->block_size);
    }
    if (__builtin_mul_overflow(numel / tinfo->block_size, static_cast<uint64_t>(tinfo->type_size), &info.nbytes)) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': byte size overflows", path, info.name);
    }
    if (info.offset % g->alignment_ != 0) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': offset {} is not a multiple of the alignment {}", path,
           info.name, info.offset, g->alignment_);
    }
    if (!g->tensor_index_.emplace(info.name, g->tensors_.size()).second) {
      fail(ErrorCode::kCorruptData, "{}: duplicate tensor name '{}'", path, info.name);
    }
    g->tensors_.push_back(std::move(info));
  }

  const uint64_t data_start = (c.pos() + g->alignment_ - 1) / g->alignment_ * g->alignment_;
  const uint64_t file_size = g->file_->size();
  if (data_start > file_size && !g->tensors_.empty()) {
    fail(ErrorCode::kCorruptData, "{}: tensor data section starts past the end of the file", path);
  }
  const uint64_t data_size = data_start <= file_size ? file_size - data_start : 0;
  std::vector<const GgufTensorInfo*> by_offset;
  for (auto& t : g->tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': data [{}, +{}) runs past the end of the file ({} data bytes)",
           path, t.name, t.offset, t.nbytes, data_size);
    }
    t.data = g->file_->data() + data_start + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    const auto* cur = by_offset[i];
    if (prev->nbytes > 0 && cur->nbytes > 0 && prev->offset + prev->nbytes > cur->offset) {
      fail(ErrorCode::kCorruptData, "{}: tensors '{}' and '{}' overlap", path, prev->name, cur->name);
    }
  }
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::optional<std::string> GgufFile::get_string_opt(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->value.is_string()) fail(ErrorCode::kCorruptData, "{}: metadata '{}' is not a string", path_, key);
  return v->value.get<std::string>();
}

std::string GgufFile::get_string(const std::string& key) const {
  auto s = get_string_opt(key);
  if (!s) fail(ErrorCode::kCorruptData, "{}: metadata '{}' is missing", path_, key);
  return *s;
}

uint64_t GgufFile::get_uint_or(const std::string& key, uint64_t fallback) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return fallback;
  if (v->value.is_number_unsigned()) return v->value.get<uint64_t>();
  if (v->value.is_number_integer() && v->value.get<int64_t>() >= 0) return static_cast<uint64_t>(v->value.get<int64_t>());
  fail(ErrorCode::kCorruptData, "{}: metadata '{}' is not a non-negative integer", path_, key);
}

double GgufFile::get_float_or(const std::string& key, double fallback) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->value.is_number()) fail(ErrorCode::kCorruptData, "{}: metadata '{}' is not a number", path_, key);
  return v->value.get<double>();
}

bool GgufFile::get_bool_or(const std::string& key, bool fallback) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->value.is_boolean()) fail(ErrorCode::kCorruptData, "{}: metadata '{}' is not a bool", path_, key);
  return v->value.get<bool>();
}

const nlohmann::json& GgufFile::get_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail(ErrorCode::kCorruptData, "{}: metadata '{}' is missing", path_, key);
  if (!v->value.is_array()) fail(ErrorCode::kCorruptData, "{}: metadata '{}' is not an array", path_, key);
  return v->value;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::dequantize(const GgufTensorInfo& info) const { return to_f32(load(info)); }

Tensor GgufFile::load(const GgufTensorInfo& info) const {
  const auto tinfo = ggml_type_info(static_cast<uint32_t>(info.type));
  if (!tinfo || !tinfo->dtype) {
    fail(ErrorCode::kUnsupported, "{}: tensor '{}': ggml type {} is not supported (supported: F32, F16, BF16, Q4_0, Q4_1, "
         "Q5_0, Q5_1, Q8_0, Q4_K, Q6_K)", path_, info.name, tinfo ? tinfo->name : "?");
  }
  const DType dtype = *tinfo->dtype;
  Tensor view(dtype, info.shape(), const_cast<uint8_t*>(info.data), file_);
  QS_CHECK(view.nbytes() == info.nbytes) << path_ << ": tensor '" << info.name << "': " << info.nbytes << " bytes for " << view.nbytes();
  // The mapped bytes themselves where they are aligned for their element type
  // (the file's alignment, 32 unless it says otherwise), else a copy.
  const size_t align = dtype_is_blocked(dtype) ? 2 : dtype_size(dtype);
  if (reinterpret_cast<uintptr_t>(info.data) % align == 0) return view;
  Tensor out = Tensor::zeros(dtype, info.shape());
  std::memcpy(out.data(), info.data, out.nbytes());  // (the reader checked that the data lies in the file)
  return out;
}

}  // namespace qserve
