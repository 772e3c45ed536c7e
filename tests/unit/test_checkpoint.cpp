// open_checkpoint on Hugging Face directories made here: a single file, shards
// with an index, and broken directories (each a clear Error).
#include <gtest/gtest.h>

#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "model/checkpoint.h"
#include "model/default_model.h"
#include "model/safetensors.h"
#include "test_files.h"

namespace qserve {
namespace {

using testing_files::expect_error;
using testing_files::TempDir;
using testing_files::write_bytes;

Tensor filled(std::vector<int64_t> shape, float base) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = base + static_cast<float>(i);
  return t;
}

void write_config(const TempDir& dir) { write_bytes(dir.file("config.json"), R"({"architectures":["LlamaForCausalLM"]})"); }

TEST(Checkpoint, SingleFileDirectory) {
  TempDir dir;
  write_config(dir);
  SafetensorsWriter w;
  w.add("model.norm.weight", filled({4}, 1.0f));
  w.add("model.embed_tokens.weight", filled({3, 4}, 10.0f));
  w.write(dir.file("model.safetensors"));
  write_bytes(dir.file("tokenizer.json"), R"({"model":{"type":"BPE"}})");
  auto ckpt = open_checkpoint(dir.path().string());
  EXPECT_EQ(ckpt->path(), dir.path().string());
  EXPECT_EQ(ckpt->config()["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"model.embed_tokens.weight", "model.norm.weight"}));
  EXPECT_TRUE(ckpt->has("model.norm.weight"));
  EXPECT_FALSE(ckpt->has("lm_head.weight"));
  EXPECT_EQ(ckpt->get("model.embed_tokens.weight").shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ckpt->get("model.embed_tokens.weight").data_as<float>()[11], 21.0f);
  expect_error([&] { ckpt->get("lm_head.weight"); }, ErrorCode::kNotFound, {"lm_head.weight"});
  ASSERT_TRUE(ckpt->json_file("tokenizer.json").has_value());
  EXPECT_EQ((*ckpt->json_file("tokenizer.json"))["model"]["type"], "BPE");
  EXPECT_FALSE(ckpt->json_file("generation_config.json").has_value());
}

TEST(Checkpoint, ShardedDirectory) {
  TempDir dir;
  write_config(dir);
  SafetensorsWriter a, b;
  a.add("x", filled({2}, 0.0f));
  b.add("y", filled({3}, 5.0f));
  b.add("z", filled({1}, 9.0f));
  a.write(dir.file("model-00001-of-00002.safetensors"));
  b.write(dir.file("model-00002-of-00002.safetensors"));
  write_bytes(dir.file("model.safetensors.index.json"),
              R"({"metadata":{},"weight_map":{"x":"model-00001-of-00002.safetensors",)"
              R"("y":"model-00002-of-00002.safetensors","z":"model-00002-of-00002.safetensors"}})");
  auto ckpt = open_checkpoint(dir.path().string());
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(ckpt->get("y").data_as<float>()[2], 7.0f);
  EXPECT_EQ(ckpt->get("z").data_as<float>()[0], 9.0f);

  // The index names a tensor in the wrong shard.
  write_bytes(dir.file("model.safetensors.index.json"),
              R"({"weight_map":{"x":"model-00002-of-00002.safetensors"}})");
  expect_error([&] { open_checkpoint(dir.path().string()); }, ErrorCode::kCorruptData,
               {"'x'", "model-00002-of-00002.safetensors"});
  // The index names a shard that does not exist.
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map":{"x":"model-00003-of-00002.safetensors"}})");
  expect_error([&] { open_checkpoint(dir.path().string()); }, ErrorCode::kNotFound, {"model-00003-of-00002"});
  // A path outside the directory.
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map":{"x":"../x.safetensors"}})");
  expect_error([&] { open_checkpoint(dir.path().string()); }, ErrorCode::kCorruptData, {"../x.safetensors"});
  // No weight_map.
  write_bytes(dir.file("model.safetensors.index.json"), R"({"metadata":{}})");
  expect_error([&] { open_checkpoint(dir.path().string()); }, ErrorCode::kCorruptData, {"weight_map"});
  // Not JSON.
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map":)");
  expect_error([&] { open_checkpoint(dir.path().string()); }, ErrorCode::kCorruptData,
               {"model.safetensors.index.json", "not valid JSON"});
}

TEST(Checkpoint, BrokenDirectoriesGiveClearErrors) {
  TempDir dir;
  expect_error([&] { open_checkpoint(dir.file("nowhere")); }, ErrorCode::kNotFound, {"nowhere", "does not exist"});
  expect_error([&] { open_checkpoint(dir.path().string()); }, ErrorCode::kNotFound, {"config.json"});
  write_bytes(dir.file("config.json"), "{not json");
  expect_error([&] { open_checkpoint(dir.path().string()); }, ErrorCode::kCorruptData, {"config.json", "not valid JSON"});
  write_config(dir);
  expect_error([&] { open_checkpoint(dir.path().string()); }, ErrorCode::kNotFound, {"model.safetensors"});
  write_bytes(dir.file("model.safetensors"), "garbage!garbage!");
  expect_error([&] { open_checkpoint(dir.path().string()); }, ErrorCode::kCorruptData, {"model.safetensors"});
  write_bytes(dir.file("weights.bin"), "hello");
  expect_error([&] { open_checkpoint(dir.file("weights.bin")); }, ErrorCode::kUnsupported, {"weights.bin"});
}

// Sets an environment variable for one scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Checkpoint, ResolvesTheModelPath) {
  TempDir home;
  ScopedEnv h("QSERVE_HOME", home.path().c_str());
  ScopedEnv m("QSERVE_MODEL", nullptr);
  EXPECT_EQ(resolve_model_path("/some/dir"), "/some/dir");
  expect_error([] { resolve_model_path(""); }, ErrorCode::kNotFound, {"scripts/install_model.sh"});
  const std::string dir = home.file("models/SmolLM2-135M-Instruct");
  EXPECT_EQ(default_model_dir(), dir);
  std::filesystem::create_directories(dir);
  write_bytes(dir + "/config.json", "{}");
  EXPECT_EQ(resolve_model_path(""), dir);
  ScopedEnv m2("QSERVE_MODEL", "/env/model.gguf");
  EXPECT_EQ(resolve_model_path(""), "/env/model.gguf");
  EXPECT_EQ(resolve_model_path("flag"), "flag");
}

}  // namespace
}  // namespace qserve
