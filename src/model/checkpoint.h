// The one loading API for model weights: a Hugging Face directory
// (config.json + model.safetensors, or shards listed in
// model.safetensors.index.json) or a GGUF file (tensors renamed to Hugging
// Face names, with a synthesized config.json).
//
// Tensors are zero-copy views of the memory-mapped files where they can be:
// HF tensors always, GGUF tensors in their stored type (F32, F16, BF16 or a
// ggml block format, core/dtype.h) except the q / k projections, whose rows
// llama.cpp permutes (heap copies in Hugging Face row order).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qserve {

class Checkpoint {  // a loaded model checkpoint: config + named tensors (zero-copy where possible)
 public:
  // `json_files`: JSON side files known without a directory (a GGUF's
  // synthesized tokenizer.json, tokenizer_config.json, generation_config.json).
  Checkpoint(std::string path, nlohmann::json config, std::map<std::string, Tensor> tensors,
             std::map<std::string, nlohmann::json> json_files = {}, bool is_directory = true);

  const nlohmann::json& config() const { return config_; }  // HF config.json content
  const std::string& path() const { return path_; }          // directory (or gguf file) it came from
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const Tensor& get(const std::string& name) const;  // throws Error(kNotFound) naming the tensor
  std::vector<std::string> names() const;            // sorted

  // Every tensor, by name.
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  // A JSON side file by name ("tokenizer.json", "tokenizer_config.json",
  // "generation_config.json"): read from the directory, or synthesized from a
  // GGUF's metadata. nullopt when there is none; Error(kCorruptData) if it is
  // not valid JSON.
  std::optional<nlohmann::json> json_file(const std::string& name) const;
  // True for a Hugging Face directory (side files such as tokenizer.model live in path()).
  bool is_directory() const { return is_directory_; }

 private:
  std::string path_;
  nlohmann::json config_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, nlohmann::json> json_files_;
  bool is_directory_ = true;
};

std::shared_ptr<Checkpoint> open_checkpoint(const std::string& path);  // HF dir or .gguf file

// Reads and parses a JSON file; Error(kNotFound) if missing, Error(kCorruptData) naming it if invalid.
nlohmann::json read_json_file(const std::string& path);

}  // namespace qserve
