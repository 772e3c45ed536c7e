#include "model/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace qserve {
namespace {

// The reference implementation refuses headers above 100 MB; so do we (a
// corrupt length must not make us parse gigabytes).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A JSON value that must be a non-negative integer that fits in uint64.
bool as_u64(const nlohmann::json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

struct Span {
  std::string name;
  uint64_t begin, end;
};

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> st(new SafetensorsFile());
  st->path_ = path;
  st->file_ = MappedFile::open(path);
  const uint8_t* base = st->file_->data();
  const uint64_t file_size = st->file_->size();
  if (file_size < 8) fail(ErrorCode::kCorruptData, "{}: not a safetensors file: {} bytes, need at least 8", path, file_size);
  const uint64_t header_len = read_u64_le(base);
  if (header_len > file_size - 8) {
    fail(ErrorCode::kCorruptData, "{}: header length {} runs past the end of the file ({} bytes)", path, header_len,
         file_size);
  }
  if (header_len > kMaxHeaderBytes) fail(ErrorCode::kCorruptData, "{}: header length {} is too large", path, header_len);
  const char* header_begin = reinterpret_cast<const char*>(base + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_len);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorruptData, "{}: header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail(ErrorCode::kCorruptData, "{}: header is not a JSON object", path);

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;
  const uint8_t* data = base + data_start;
  std::vector<Span> spans;
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(ErrorCode::kCorruptData, "{}: __metadata__ is not an object", path);
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(ErrorCode::kCorruptData, "{}: __metadata__ value of '{}' is not a string", path, k);
      }
      st->metadata_ = entry;
      continue;
    }
    if (!entry.is_object()) fail(ErrorCode::kCorruptData, "{}: tensor '{}': entry is not an object", path, name);
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': missing dtype", path, name);
    }
    const std::string dtype_str = entry["dtype"].get<std::string>();
    const auto dtype = dtype_from_name(dtype_str);
    if (!dtype || dtype_is_blocked(*dtype)) {  // (the ggml block formats are GGUF's, not safetensors')
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': unknown dtype '{}'", path, name, dtype_str);
    }
    if (!entry.contains("shape") || !entry["shape"].is_array()) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': missing shape", path, name);
    }
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const auto& d : entry["shape"]) {
      uint64_t dim = 0;
      if (!as_u64(d, &dim) || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(ErrorCode::kCorruptData, "{}: tensor '{}': shape entry {} is not a non-negative integer", path, name,
             d.dump());
      }
      if (__builtin_mul_overflow(numel, dim, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(ErrorCode::kCorruptData, "{}: tensor '{}': shape {} overflows", path, name, entry["shape"].dump());
      }
      shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, dtype_size(*dtype), &nbytes)) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': byte size of shape {} overflows", path, name,
           entry["shape"].dump());
    }
    const auto& offsets = entry.contains("data_offsets") ? entry["data_offsets"] : nlohmann::json();
    uint64_t begin = 0, end = 0;
    if (!offsets.is_array() || offsets.size() != 2 || !as_u64(offsets[0], &begin) || !as_u64(offsets[1], &end)) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': data_offsets must be [begin, end]", path, name);
    }
    if (begin > end) fail(ErrorCode::kCorruptData, "{}: tensor '{}': data_offsets [{}, {}] are reversed", path, name, begin, end);
    if (end > data_size) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': data_offsets [{}, {}] run past the end of the data ({} bytes)",
           path, name, begin, end, data_size);
    }
    if (end - begin != nbytes) {
      fail(ErrorCode::kCorruptData, "{}: tensor '{}': {} x {} needs {} bytes but data_offsets [{}, {}] hold {}", path,
           name, entry["shape"].dump(), dtype_str, nbytes, begin, end, end - begin);
    }
    spans.push_back({name, begin, end});
    void* ptr = const_cast<uint8_t*>(data + begin);
    if (reinterpret_cast<uintptr_t>(ptr) % dtype_size(*dtype) != 0) {
      // A misaligned tensor (a header length that is not a multiple of 8):
      // copy it so that typed loads stay aligned.
      Tensor copy = Tensor::zeros(*dtype, shape);
      if (nbytes) std::memcpy(copy.data(), ptr, nbytes);
      tensors.emplace(name, std::move(copy));
    } else {
      tensors.emplace(name, Tensor(*dtype, std::move(shape), ptr, st->file_));
    }
  }
  // Tensors must not share bytes (zero-size tensors are allowed anywhere).
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    const Span& prev = spans[i - 1];
    const Span& cur = spans[i];
    if (prev.end > cur.begin && cur.begin != cur.end && prev.begin != prev.end) {
      fail(ErrorCode::kCorruptData, "{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", path, prev.name, prev.begin,
           prev.end, cur.name, cur.begin, cur.end);
    }
  }
  for (const Span& s : spans) st->names_.push_back(s.name);
  st->tensors_ = std::move(tensors);
  return st;
}

const Tensor& SafetensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(ErrorCode::kNotFound, "{}: no tensor named '{}'", path_, name);
  return it->second;
}

void SafetensorsWriter::add(const std::string& name, const Tensor& tensor) {
  if (name.empty() || name == "__metadata__") fail(ErrorCode::kInvalidArgument, "invalid tensor name '{}'", name);
  for (const auto& e : entries_) {
    if (e.name == name) fail(ErrorCode::kInvalidArgument, "duplicate tensor name '{}'", name);
  }
  QS_CHECK(tensor.numel() == 0 || tensor.data() != nullptr) << "tensor '" << name << "' has no data";
  if (dtype_is_blocked(tensor.dtype())) {
    fail(ErrorCode::kInvalidArgument, "tensor '{}': {} is a GGUF block format, not a safetensors dtype (widen it first)", name,
         dtype_name(tensor.dtype()));
  }
  entries_.push_back({name, tensor});
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

void SafetensorsWriter::write(const std::string& path) const {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  // Larger elements first (stable), as the reference writer does: every tensor
  // then starts aligned to its element size without gaps (the reference
  // reader rejects gaps between tensors).
  std::vector<const Entry*> order;
  for (const auto& e : entries_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return dtype_size(a->tensor.dtype()) > dtype_size(b->tensor.dtype());
  });
  uint64_t offset = 0;
  for (const Entry* ep : order) {
    const Entry& e = *ep;
    const uint64_t n = e.tensor.nbytes();
    header[e.name] = {{"dtype", std::string(dtype_name(e.tensor.dtype()))},
                      {"shape", e.tensor.shape()},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  // Pad with spaces so that the data starts 8-byte aligned (as the reference writer does).
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) fail(ErrorCode::kIo, "cannot create {}: {}", tmp, std::strerror(errno));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const Entry* e : order) {
    if (!ok) break;
    const size_t n = e->tensor.nbytes();
    ok = n == 0 || std::fwrite(e->tensor.data(), 1, n, f) == n;
  }
  const int write_errno = errno;
  ok = (std::fflush(f) == 0) && ok;
  ok = (::fsync(fileno(f)) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail(ErrorCode::kIo, "cannot write {}: {}", path, std::strerror(write_errno ? write_errno : errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(ErrorCode::kIo, "cannot rename {} to {}: {}", tmp, path, std::strerror(err));
  }
}

}  // namespace qserve
