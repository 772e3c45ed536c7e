// GGUF reader: metadata of every type, dequantization bit-exact with
// gguf.quants.dequantize (tests/data/gguf, made by scripts/make_gguf_test_data.py),
// the Hugging Face view of a tiny Llama (q/k un-permuted), malformed files made
// here (each a clear Error, never a crash), and the real default model if installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "engine/tokenizer_codec.h"
#include "model/checkpoint.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "test_files.h"

namespace qserve {
namespace {

using testing_files::append_le;
using testing_files::expect_error;
using testing_files::TempDir;
using testing_files::write_bytes;

std::string data_file(const std::string& name) { return std::string(QSERVE_SOURCE_DIR) + "/tests/data/gguf/" + name; }

TEST(Gguf, ReadsEveryMetadataType) {
  auto g = GgufFile::open(data_file("quants.gguf"));
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->alignment(), 64u);
  EXPECT_EQ(g->get_uint_or("test.u8", 0), 200u);
  EXPECT_EQ(g->find("test.i8")->value.get<int>(), -100);
  EXPECT_EQ(g->get_uint_or("test.u16", 0), 60000u);
  EXPECT_EQ(g->find("test.i16")->value.get<int>(), -30000);
  EXPECT_EQ(g->get_uint_or("test.u32", 0), 4000000000u);
  EXPECT_EQ(g->find("test.i32")->value.get<int64_t>(), -2000000000);
  EXPECT_EQ(g->get_float_or("test.f32", 0), static_cast<double>(0.1f));
  EXPECT_TRUE(g->get_bool_or("test.bool", false));
  EXPECT_EQ(g->get_string("test.string"), "h\xc3\xa9llo w\xc3\xb6rld");
  EXPECT_EQ(g->get_uint_or("test.u64", 0), (1ull << 63) + 5);
  EXPECT_EQ(g->find("test.i64")->value.get<int64_t>(), -(1ll << 62));
  EXPECT_EQ(g->get_float_or("test.f64", 0), 2.5e-300);
  EXPECT_EQ(g->get_array("test.array_i32"), nlohmann::json({1, -2, 3}));
  EXPECT_EQ(g->find("test.array_i32")->element_type, GgufValueType::kI32);
  EXPECT_EQ(g->get_array("test.array_str"), nlohmann::json({"a", "", "\xc3\xbc"}));
  EXPECT_EQ(g->get_array("test.array_nested"), nlohmann::json({{1, 2}, {3}}));
  expect_error([&] { g->get_string("test.u8"); }, ErrorCode::kCorruptData, {"test.u8", "not a string"});
  expect_error([&] { g->get_string("missing.key"); }, ErrorCode::kCorruptData, {"missing.key"});
}

TEST(Gguf, DequantizesBitExactWithReference) {
  auto g = GgufFile::open(data_file("quants.gguf"));
  int checked = 0;
  for (const auto& info : g->tensors()) {
    const GgufTensorInfo* ref = g->find_tensor(info.name + ".ref");
    if (ref == nullptr) continue;
    SCOPED_TRACE(info.name);
    EXPECT_EQ(info.data - g->tensors()[0].data, static_cast<ptrdiff_t>(info.offset - g->tensors()[0].offset));
    EXPECT_EQ(info.offset % 64, 0u);
    const Tensor got = g->dequantize(info);
    const Tensor want = g->dequantize(*ref);
    ASSERT_EQ(got.shape(), want.shape());
    ASSERT_EQ(ref->type, GgmlType::kF32);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0);
    float max_abs = 0;
    for (float v : want.span<float>()) max_abs = std::max(max_abs, std::fabs(v));
    EXPECT_GT(max_abs, 0.0f);  // a real comparison, not of zeros
    ++checked;
  }
  EXPECT_EQ(checked, 10);  // F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q6_K
}

// The checkpoint's tensors against the reference file's (F32): the same names
// and shapes, each of the dtype `dtype_of(name)` and, widened, the same bits.
void expect_tensors_like(const Checkpoint& ckpt, const SafetensorsFile& want, const std::function<DType(const std::string&)>& dtype_of) {
  std::vector<std::string> want_names = want.names();
  std::sort(want_names.begin(), want_names.end());
  ASSERT_EQ(ckpt.names(), want_names);
  for (const auto& name : want_names) {
    SCOPED_TRACE(name);
    const Tensor& a = ckpt.get(name);
    const Tensor& b = want.get(name);
    ASSERT_EQ(a.shape(), b.shape());
    ASSERT_EQ(a.dtype(), dtype_of(name));
    ASSERT_EQ(b.dtype(), DType::kF32);
    const Tensor a32 = a.dtype() == DType::kF32 ? a : to_f32(a);
    EXPECT_EQ(std::memcmp(a32.data(), b.data(), b.nbytes()), 0);
  }
}

// Every matrix F16 or BF16, q / k permuted: each keeps its stored type (half
// the bytes of F32, exact), rows in the Hugging Face order.
TEST(Gguf, SixteenBitTensorsKeepTheirType) {
  auto ckpt = open_checkpoint(data_file("tiny_llama_16bit.gguf"));
  auto want = SafetensorsFile::open(data_file("tiny_llama_16bit_hf.safetensors"));
  // The norms are stored F32; the matrices as the writer stored them.
  const std::map<std::string, DType> bf16 = {{"model.layers.0.self_attn.k_proj.weight", DType::kBF16},
                                             {"model.layers.0.self_attn.v_proj.weight", DType::kBF16},
                                             {"model.layers.0.mlp.up_proj.weight", DType::kBF16}};
  expect_tensors_like(*ckpt, *want, [&](const std::string& name) {
    if (name.find("norm") != std::string::npos) return DType::kF32;
    return bf16.count(name) ? DType::kBF16 : DType::kF16;
  });
}

TEST(Gguf, TinyLlamaLoadsInHuggingFaceLayout) {
  auto ckpt = open_checkpoint(data_file("tiny_llama.gguf"));
  auto want = SafetensorsFile::open(data_file("tiny_llama_hf.safetensors"));
  // Every tensor keeps its stored type (scripts/make_gguf_test_data.py): the
  // block formats too, widened only where they are read.
  const std::map<std::string, DType> stored = {{"v_proj", DType::kF16},   {"o_proj", DType::kBF16}, {"embed_tokens", DType::kQ4_0},
                                               {"gate_proj", DType::kQ8_0}, {"up_proj", DType::kQ4_1}, {"down_proj", DType::kQ5_0}};
  expect_tensors_like(*ckpt, *want, [&](const std::string& name) {
    for (const auto& [part, dtype] : stored)
      if (name.find(part) != std::string::npos) return dtype;
    return DType::kF32;
  });
  EXPECT_FALSE(ckpt->has("lm_head.weight"));
  const auto& c = ckpt->config();
  EXPECT_EQ(c["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(c["hidden_size"], 32);
  EXPECT_EQ(c["num_attention_heads"], 4);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_EQ(c["head_dim"], 8);
  EXPECT_EQ(c["intermediate_size"], 64);
  EXPECT_EQ(c["num_hidden_layers"], 2);
  EXPECT_EQ(c["vocab_size"], 263);
  EXPECT_EQ(c["rms_norm_eps"], 1e-5);
  EXPECT_EQ(c["rope_theta"], 10000.0);
  EXPECT_EQ(c["tie_word_embeddings"], true);

  const auto tok = ckpt->json_file("tokenizer.json");
  ASSERT_TRUE(tok.has_value());
  EXPECT_EQ((*tok)["model"]["type"], "BPE");
  EXPECT_EQ((*tok)["model"]["vocab"].size(), 263u);
  EXPECT_EQ((*tok)["model"]["vocab"]["\xc4\xa0the"], 261);  // "Ġthe"
  EXPECT_EQ((*tok)["model"]["merges"][2], nlohmann::json({"\xc4\xa0t", "he"}));
  EXPECT_EQ((*tok)["added_tokens"].size(), 3u);
  EXPECT_EQ((*tok)["added_tokens"][2]["content"], "<|im_end|>");
  EXPECT_EQ((*tok)["pre_tokenizer"]["pretokenizers"][0]["type"], "Digits");
  EXPECT_EQ((*tok)["decoder"]["type"], "ByteLevel");
  const auto tc = ckpt->json_file("tokenizer_config.json");
  EXPECT_EQ((*tc)["bos_token"], "<|im_start|>");
  EXPECT_EQ((*tc)["eos_token"], "<|endoftext|>");
  EXPECT_EQ((*tc)["add_bos_token"], false);
  EXPECT_NE((*tc)["chat_template"].get<std::string>().find("<|im_end|>"), std::string::npos);
  // eos 0 from the metadata, and <|im_end|> (2), which ends a chat turn.
  EXPECT_EQ((*ckpt->json_file("generation_config.json"))["eos_token_id"], nlohmann::json({0, 2}));
}

TEST(Gguf, TokenizerLoadsFromTheGgufFile) {
  auto tok = load_tokenizer(data_file("tiny_llama.gguf"));
  EXPECT_EQ(tok->vocab_size(), 263);
  EXPECT_EQ(tok->encode(" the", false), std::vector<int32_t>({261}));  // "Ġthe" through the merges
  EXPECT_EQ(tok->encode("<|im_start|>in", false), std::vector<int32_t>({1, 262}));
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>({0, 2}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{261, 262}, false), " thein");
}

TEST(Gguf, ChatTemplateComesWithTheTokenizerFromOneOpen) {
  std::optional<std::string> tmpl;
  auto tok = load_tokenizer(data_file("tiny_llama.gguf"), &tmpl);
  EXPECT_EQ(tok->vocab_size(), 263);
  ASSERT_TRUE(tmpl.has_value());
  EXPECT_NE(tmpl->find("<|im_end|>"), std::string::npos);
  const auto codec = TokenizerCodec::load(data_file("tiny_llama.gguf"));
  EXPECT_EQ(codec->chat_template(), *tmpl);
  EXPECT_EQ(codec->encode(" the", false), std::vector<int32_t>({261}));
  // A tokenizer that is not a GGUF file leaves it empty.
  std::optional<std::string> none;
  load_tokenizer(std::string(QSERVE_SOURCE_DIR) + "/tests/data/tokenizer/bpe_llama3", &none);
  EXPECT_FALSE(none.has_value());
}

// Builds GGUF bytes field by field, so that each test breaks exactly one thing.
class GgufBuilder {
 public:
  uint32_t version = 3;
  uint64_t alignment = 32;
  std::string magic = "GGUF";

  static void str(std::string* out, const std::string& s) {
    append_le<uint64_t>(out, s.size());
    *out += s;
  }
  void kv_raw(const std::string& key, uint32_t type, const std::string& payload) {
    str(&kv_, key);
    append_le<uint32_t>(&kv_, type);
    kv_ += payload;
    ++n_kv_;
  }
  void kv_u32(const std::string& key, uint32_t v) {
    std::string p;
    append_le<uint32_t>(&p, v);
    kv_raw(key, 4, p);
  }
  void kv_string(const std::string& key, const std::string& v) {
    std::string p;
    str(&p, v);
    kv_raw(key, 8, p);
  }
  void tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(&infos_, name);
    append_le<uint32_t>(&infos_, static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) append_le<uint64_t>(&infos_, d);
    append_le<uint32_t>(&infos_, type);
    append_le<uint64_t>(&infos_, offset);
    ++n_tensors_;
  }
  std::string data;
  std::string build() const {
    std::string out = magic;
    append_le<uint32_t>(&out, version);
    append_le<uint64_t>(&out, n_tensors_);
    append_le<uint64_t>(&out, n_kv_);
    out += kv_ + infos_;
    while (out.size() % alignment) out.push_back('\0');
    return out + data;
  }

 private:
  std::string kv_, infos_;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
};

GgufBuilder valid_builder() {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama");
  b.kv_u32("test.count", 7);
  b.tensor("a", {4, 2}, 0, 0);   // F32 [2, 4]: 32 bytes
  b.tensor("b", {32}, 8, 32);    // Q8_0: one block, 34 bytes
  b.data = std::string(32 + 34, '\x01');
  return b;
}

TEST(Gguf, ValidBuilderFileOpens) {
  TempDir dir;
  const std::string path = dir.file("ok.gguf");
  write_bytes(path, valid_builder().build());
  auto g = GgufFile::open(path);
  ASSERT_EQ(g->tensors().size(), 2u);
  EXPECT_EQ(g->tensors()[0].shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(g->tensors()[1].nbytes, 34u);
  EXPECT_EQ(g->get_uint_or("test.count", 0), 7u);
  // ...but it is no model: open_checkpoint says which tensor it cannot place.
  expect_error([&] { open_checkpoint(path); }, ErrorCode::kUnsupported, {"'a'"});
}

TEST(Gguf, EveryTruncationIsAnError) {
  TempDir dir;
  const std::string bytes = valid_builder().build();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string path = dir.file("t.gguf");
    write_bytes(path, bytes.substr(0, n));
    try {
      GgufFile::open(path);
      ADD_FAILURE() << "truncated to " << n << " bytes: no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << n << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

struct BadGguf {
  const char* label;
  std::function<void(GgufBuilder&)> edit;
  ErrorCode code;
  std::vector<std::string> needles;
};

TEST(Gguf, MalformedFilesGiveClearErrors) {
  std::string huge;
  append_le<uint64_t>(&huge, ~0ull);
  const std::vector<BadGguf> cases = {
      {"bad magic", [](GgufBuilder& b) { b.magic = "GGML"; }, ErrorCode::kCorruptData, {"bad magic"}},
      {"version 1", [](GgufBuilder& b) { b.version = 1; }, ErrorCode::kUnsupported, {"version 1"}},
      {"version 4", [](GgufBuilder& b) { b.version = 4; }, ErrorCode::kCorruptData, {"version 4"}},
      {"string length past end", [&](GgufBuilder& b) { b.kv_raw("k", 8, huge); }, ErrorCode::kCorruptData,
       {"'k'", "past the end"}},
      {"array length past end",
       [&](GgufBuilder& b) {
         std::string p;
         append_le<uint32_t>(&p, 4);
         p += huge;
         b.kv_raw("arr", 9, p);
       },
       ErrorCode::kCorruptData, {"'arr'", "array length"}},
      {"arrays nested too deep",
       [&](GgufBuilder& b) {
         std::string p;
         for (int i = 0; i < 6; ++i) {
           append_le<uint32_t>(&p, 9);
           append_le<uint64_t>(&p, 1);
         }
         b.kv_raw("deep", 9, p);
       },
       ErrorCode::kCorruptData, {"'deep'", "nested"}},
      {"unknown value type", [](GgufBuilder& b) { b.kv_raw("v", 13, "xxxx"); }, ErrorCode::kCorruptData,
       {"'v'", "unknown value type 13"}},
      {"duplicate key", [](GgufBuilder& b) { b.kv_u32("test.count", 1); }, ErrorCode::kCorruptData,
       {"duplicate", "test.count"}},
      {"alignment zero", [](GgufBuilder& b) { b.kv_u32("general.alignment", 0); }, ErrorCode::kCorruptData,
       {"general.alignment"}},
      {"alignment not power of two", [](GgufBuilder& b) { b.kv_u32("general.alignment", 48); },
       ErrorCode::kCorruptData, {"general.alignment", "power of two"}},
      {"too many dims", [](GgufBuilder& b) { b.tensor("c", {1, 1, 1, 1, 1}, 0, 96); }, ErrorCode::kCorruptData,
       {"'c'", "5 dimensions"}},
      {"dims overflow", [](GgufBuilder& b) { b.tensor("c", {1ull << 32, 1ull << 32}, 0, 96); },
       ErrorCode::kCorruptData, {"'c'", "overflow"}},
      {"bytes overflow", [](GgufBuilder& b) { b.tensor("c", {1ull << 62}, 0, 96); }, ErrorCode::kCorruptData,
       {"'c'", "overflows"}},
      {"unknown ggml type", [](GgufBuilder& b) { b.tensor("c", {4}, 99, 96); }, ErrorCode::kUnsupported,
       {"'c'", "type 99"}},
      {"row not whole blocks", [](GgufBuilder& b) { b.tensor("c", {20}, 2, 96); }, ErrorCode::kCorruptData,
       {"'c'", "block size"}},
      {"misaligned offset", [](GgufBuilder& b) { b.tensor("c", {4}, 0, 70); }, ErrorCode::kCorruptData,
       {"'c'", "alignment"}},
      {"data past the end", [](GgufBuilder& b) { b.tensor("c", {64}, 0, 64); }, ErrorCode::kCorruptData,
       {"'c'", "past the end"}},
      {"offset past the end", [](GgufBuilder& b) { b.tensor("c", {1}, 0, 1ull << 40); }, ErrorCode::kCorruptData,
       {"'c'", "past the end"}},
      {"overlapping tensors", [](GgufBuilder& b) { b.tensor("c", {4}, 0, 32); }, ErrorCode::kCorruptData,
       {"overlap"}},
      {"duplicate tensor", [](GgufBuilder& b) { b.tensor("a", {4}, 0, 64); }, ErrorCode::kCorruptData,
       {"duplicate", "'a'"}},
      {"tensor count past end",
       [](GgufBuilder& b) {
         for (int i = 0; i < 3; ++i) b.tensor(fmt::format("x{}", i), {}, 0, 0);
         b.data.clear();
       },
       ErrorCode::kCorruptData, {}},
  };
  TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    GgufBuilder b = valid_builder();
    c.edit(b);
    const std::string path = dir.file("bad.gguf");
    write_bytes(path, b.build());
    std::vector<std::string> needles = c.needles;
    needles.push_back(path);
    try {
      GgufFile::open(path);
      ADD_FAILURE() << c.label << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), c.code) << e.what();
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }
}

TEST(Gguf, UnsupportedArchitectureIsClear) {
  TempDir dir;
  GgufBuilder b;
  b.kv_string("general.architecture", "mamba");
  const std::string path = dir.file("m.gguf");
  write_bytes(path, b.build());
  expect_error([&] { open_checkpoint(path); }, ErrorCode::kUnsupported, {"mamba", path});
}

// q_proj / k_proj rows are un-permuted per head on load: a row count that is
// zero or not a multiple of 2 x heads (heads from the metadata, possibly
// absurd) is an error naming the tensor, not a crash (found by fuzz_gguf: a
// zero-row q_proj divided by zero).
TEST(Gguf, QkRowsThatDoNotFitTheHeadsAreAnError) {
  struct Case {
    const char* label;
    std::vector<uint64_t> ne;  // blk.0.attn_q.weight, F32
    uint64_t heads;
  };
  const std::vector<Case> cases = {
      {"zero rows", {4, 0}, 2},
      {"rows not a multiple of 2 x heads", {4, 6}, 2},
      {"more heads than row pairs", {4, 4}, 4},
      {"heads past int64", {4, 4}, ~0ull},
      {"heads zero", {4, 4}, 0},
  };
  TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    GgufBuilder b;
    b.kv_string("general.architecture", "llama");
    std::string heads;
    append_le<uint64_t>(&heads, c.heads);
    b.kv_raw("llama.attention.head_count", 10, heads);
    b.tensor("blk.0.attn_q.weight", c.ne, 0, 0);
    b.data = std::string(c.ne[0] * c.ne[1] * 4, '\0');
    const std::string path = dir.file("qk.gguf");
    write_bytes(path, b.build());
    expect_error([&] { open_checkpoint(path); }, ErrorCode::kCorruptData, {"blk.0.attn_q.weight", "heads"});
  }
}

// A byte-level GGUF tokenizer whose merges name tokens it does not have is an
// error naming the file and the merge when it is exported (before, the export
// succeeded and the tokenizer.json it made could not be loaded; fuzz_gguf).
TEST(Gguf, TokenizerMergesOutsideTheVocabularyAreAnError) {
  auto string_array = [](const std::vector<std::string>& items) {
    std::string p;
    append_le<uint32_t>(&p, 8);  // element type: string
    append_le<uint64_t>(&p, items.size());
    for (const auto& s : items) GgufBuilder::str(&p, s);
    return p;
  };
  struct Case {
    std::vector<std::string> merges;
    std::string needle;
  };
  const std::vector<Case> cases = {{{"a b", "ab c"}, "'c', not a token"}, {{"b a"}, "makes 'ba', not a token"}};
  TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.needle);
    GgufBuilder b;
    b.kv_string("general.architecture", "llama");
    b.kv_string("tokenizer.ggml.model", "gpt2");
    b.kv_raw("tokenizer.ggml.tokens", 9, string_array({"a", "b", "ab"}));
    b.kv_raw("tokenizer.ggml.merges", 9, string_array(c.merges));
    const std::string path = dir.file("tok.gguf");
    write_bytes(path, b.build());
    auto g = GgufFile::open(path);
    expect_error([&] { gguf_tokenizer_json(*g); }, ErrorCode::kCorruptData, {path, "tokenizer.ggml.merges", c.needle});
  }
}

// The default model's GGUF: QSERVE_MODEL_GGUF, or the source.txt that
// scripts/install_model.sh leaves in the converted model directory.
std::string default_model_gguf() {
  if (const char* env = std::getenv("QSERVE_MODEL_GGUF"); env && *env) return env;
  std::string home;
  if (const char* h = std::getenv("QSERVE_HOME"); h && *h) {
    home = h;
  } else if (const char* h2 = std::getenv("HOME"); h2 && *h2) {
    home = std::string(h2) + "/.cache/qserve";
  }
  std::ifstream in(home + "/models/SmolLM2-135M-Instruct/source.txt");
  std::string line;
  if (in && std::getline(in, line) && std::filesystem::exists(line)) return line;
  return "";
}

std::vector<float> hex_floats(const std::string& hex) {
  std::vector<float> out(hex.size() / 8);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits = 0;
    for (int k = 0; k < 4; ++k) {
      const uint32_t byte = static_cast<uint32_t>(std::stoul(hex.substr(i * 8 + k * 2, 2), nullptr, 16));
      bits |= byte << (8 * k);
    }
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

TEST(Gguf, DefaultModelMatchesReference) {
  const std::string path = default_model_gguf();
  if (path.empty()) GTEST_SKIP() << "skipped: default model not installed (run scripts/install_model.sh or set QSERVE_MODEL_GGUF)";
  auto g = GgufFile::open(path);
  EXPECT_EQ(g->tensors().size(), 272u);
  const auto ref = read_json_file(data_file("smollm2_ref.json"));
  for (const auto& [name, r] : ref["tensors"].items()) {
    SCOPED_TRACE(name);
    const GgufTensorInfo* info = g->find_tensor(name);
    ASSERT_NE(info, nullptr);
    const Tensor t = g->dequantize(*info);
    EXPECT_EQ(t.shape(), r["shape"].get<std::vector<int64_t>>());
    const int64_t cols = t.dim(-1);
    const auto first = hex_floats(r["first_row"]);
    const auto last = hex_floats(r["last_row"]);
    ASSERT_EQ(static_cast<int64_t>(first.size()), cols);
    EXPECT_EQ(std::memcmp(t.data_as<float>(), first.data(), cols * 4), 0);
    EXPECT_EQ(std::memcmp(t.data_as<float>() + t.numel() - cols, last.data(), cols * 4), 0);
    double sum = 0, sum_abs = 0;
    for (float v : t.span<float>()) {
      sum += v;
      sum_abs += std::fabs(v);
    }
    EXPECT_NEAR(sum, r["sum"].get<double>(), 1e-6 * r["sum_abs"].get<double>());
    EXPECT_NEAR(sum_abs, r["sum_abs"].get<double>(), 1e-9 * r["sum_abs"].get<double>());
  }
  auto ckpt = open_checkpoint(path);
  EXPECT_EQ(ckpt->names().size(), 272u);
  EXPECT_EQ(ckpt->config()["num_hidden_layers"], 30);
  EXPECT_EQ(ckpt->config()["tie_word_embeddings"], true);
  EXPECT_EQ(ckpt->get("model.embed_tokens.weight").shape(), (std::vector<int64_t>{49152, 576}));
  const auto tok = ckpt->json_file("tokenizer.json");
  EXPECT_EQ((*tok)["model"]["vocab"].size(), 49152u);
  EXPECT_EQ((*ckpt->json_file("generation_config.json"))["eos_token_id"], nlohmann::json({2}));
}

}  // namespace
}  // namespace qserve
