// A read-only memory-mapped file (checkpoints are mapped, never read whole).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace qserve {

class MappedFile {
 public:
  // Throws Error(kNotFound / kIo) with the path in the message.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace qserve
