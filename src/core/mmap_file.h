// Read-only memory-mapped file. Model weights are used in place (zero copy);
// the mapping lives as long as the MappedFile object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace chimera {

class MappedFile {
 public:
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  // Wraps an in-memory buffer (tests, fuzzing); the bytes are copied.
  static std::shared_ptr<MappedFile> from_bytes(const void* data, size_t size);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::unique_ptr<uint8_t[]> owned_;
  std::string path_;
};

}  // namespace chimera
