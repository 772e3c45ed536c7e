// qserve convert --from gguf FILE.gguf --out DIR [--force] [--dtype f16|bf16|f32]
// Writes a Hugging Face directory: config.json, model.safetensors (F16 by default),
// tokenizer.json, tokenizer_config.json, generation_config.json. Built in
// DIR.tmp and renamed into place, so a failure leaves no partial DIR.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/app.h"
#include "core/error.h"
#include "core/half.h"
#include "model/gguf_checkpoint.h"
#include "model/safetensors.h"

namespace fs = std::filesystem;

namespace qserve::cli {
namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) fail(ErrorCode::kIo, "cannot write {}", path.string());
}

// F32 -> F16 / BF16 / F32; a value beyond the F16 range is an error, not a silent inf.
Tensor convert_tensor(const std::string& name, const Tensor& t, DType dtype) {
  Tensor f32 = t.dtype() == DType::kF32 ? t : to_f32(t);
  if (dtype == DType::kF32) return f32;
  Tensor out = Tensor::zeros(dtype, t.shape());
  if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < t.numel(); ++i) out.data_as<uint16_t>()[i] = float_to_bf16(f32.data_as<float>()[i]);
    return out;
  }
  const float* src = f32.data_as<float>();
  uint16_t* dst = out.data_as<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (std::isfinite(src[i]) && std::fabs(src[i]) > 65504.0f) {
      fail(ErrorCode::kUnsupported, "tensor '{}' holds {} which F16 cannot represent", name, src[i]);
    }
    dst[i] = float_to_half(src[i]);
  }
  return out;
}

void write_directory(const Checkpoint& ckpt, const fs::path& dir, DType dtype) {
  nlohmann::json config = ckpt.config();
  config["torch_dtype"] = dtype == DType::kF16 ? "float16" : dtype == DType::kBF16 ? "bfloat16" : "float32";
  write_text(dir / "config.json", config.dump(2) + "\n");
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    if (auto j = ckpt.json_file(name)) write_text(dir / name, j->dump(std::string(name) == "tokenizer.json" ? -1 : 2) + "\n");
  }
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  for (const auto& [name, t] : ckpt.tensors()) writer.add(name, convert_tensor(name, t, dtype));
  writer.write((dir / "model.safetensors").string());
}

bool non_empty_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) && !fs::is_empty(p, ec);
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto* sub = app.add_subcommand("convert", "Convert a checkpoint (GGUF) into a Hugging Face directory");
  // Flag storage must outlive this function: CLI11 writes into it at parse time.
  struct Options {
    std::string from = "gguf";
    std::string input;
    std::string out;
    bool force = false;
    std::string dtype = "f16";
  };
  auto opt = std::make_shared<Options>();
  sub->add_option("--from", opt->from, "Input format")->check(CLI::IsMember({"gguf"}))->capture_default_str();
  sub->add_option("input", opt->input, "Input file (.gguf)")->required();
  sub->add_option("--out", opt->out, "Output directory (config.json, model.safetensors, tokenizer files)")->required();
  sub->add_flag("--force", opt->force, "Replace a non-empty output directory");
  sub->add_option("--dtype", opt->dtype, "Tensor type of model.safetensors")
      ->check(CLI::IsMember({"f16", "bf16", "f32"}))
      ->capture_default_str();
  set_command_body(sub, [opt]() -> int {
    const std::string* input = &opt->input;
    const std::string* dtype = &opt->dtype;
    std::error_code ec;
    if (!fs::exists(*input, ec)) fail(ErrorCode::kNotFound, "input {} does not exist", *input);
    fs::path dir = fs::path(opt->out);
    if (dir.filename().empty()) dir = dir.parent_path();  // "out/" -> "out"
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
      fail(ErrorCode::kInvalidArgument, "--out {} exists and is not a directory", dir.string());
    }
    if (non_empty_dir(dir) && !opt->force) {
      fail(ErrorCode::kInvalidArgument, "--out {} is not empty (pass --force to replace it)", dir.string());
    }
    auto ckpt = open_gguf_checkpoint(*input);
    const fs::path tmp = dir.string() + ".tmp";
    fs::remove_all(tmp, ec);
    try {
      if (dir.has_parent_path()) fs::create_directories(dir.parent_path());
      fs::create_directories(tmp);
      write_directory(*ckpt, tmp, *dtype == "f32" ? DType::kF32 : *dtype == "bf16" ? DType::kBF16 : DType::kF16);
      fs::remove_all(dir);
      fs::rename(tmp, dir);
    } catch (const fs::filesystem_error& e) {
      fs::remove_all(tmp, ec);
      fail(ErrorCode::kIo, "cannot write {}: {}", dir.string(), e.code().message());
    } catch (...) {
      fs::remove_all(tmp, ec);
      throw;
    }
    std::fprintf(stderr, "converted %s (%zu tensors) to %s\n", input->c_str(), ckpt->tensors().size(),
                 dir.string().c_str());
    return 0;
  });
}

}  // namespace qserve::cli
