// Byte-level / byte-fallback BPE from tokenizer.json against Hugging Face
// `tokenizers` (reference ids: scripts/dump_tokenizer_reference.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace qserve {
namespace {

namespace fs = std::filesystem;

class BpeReference : public ::testing::TestWithParam<std::string> {};

TEST_P(BpeReference, MatchesHuggingFace) {
  const std::string dir = test::tokenizer_data_dir() + "/" + GetParam();
  auto tok = load_tokenizer(dir + "/tokenizer.json");
  test::check_against_reference(*tok, test::load_reference(dir + "/reference.json"), true);
}

INSTANTIATE_TEST_SUITE_P(Bpe, BpeReference,
                         ::testing::Values("bpe_gpt2", "bpe_llama3", "bpe_qwen2", "bpe_digits", "bpe_bytefallback",
                                           "bpe_metaspace"));

// The default model's tokenizer (SmolLM2, 49,152 tokens, Digits + ByteLevel):
// QSERVE_SMOLLM2_TOKENIZER (a tokenizer.json or its folder), else the installed
// default model ($QSERVE_HOME, default ~/.cache/qserve, see scripts/install_model.sh).
// QSERVE_SMOLLM2_REFERENCE replaces the committed reference (the end-to-end
// tests dump one for other conversions of the same model).
std::string find_smollm2_tokenizer() {
  if (const char* e = std::getenv("QSERVE_SMOLLM2_TOKENIZER")) return e;
  fs::path home;
  if (const char* h = std::getenv("QSERVE_HOME")) home = h;
  else if (const char* h = std::getenv("HOME")) home = fs::path(h) / ".cache" / "qserve";
  const fs::path p = home / "models" / "SmolLM2-135M-Instruct" / "tokenizer.json";
  return !home.empty() && fs::exists(p) ? p.string() : "";
}

TEST(TokenizerSmolLM2, MatchesHuggingFace) {
  const std::string path = find_smollm2_tokenizer();
  if (path.empty())
    GTEST_SKIP() << "skipped: the default model is not installed (scripts/install_model.sh) and "
                    "QSERVE_SMOLLM2_TOKENIZER is not set";
  const char* ref = std::getenv("QSERVE_SMOLLM2_REFERENCE");
  auto tok = load_tokenizer(path);
  test::check_against_reference(
      *tok, test::load_reference(ref ? ref : test::tokenizer_data_dir() + "/smollm2/reference.json"), true);
}

TEST(BpeTokenizer, TokenLookupAndSpecials) {
  auto tok = load_tokenizer(test::tokenizer_data_dir() + "/bpe_qwen2/tokenizer.json");
  const auto im_end = tok->token_id("<|im_end|>");
  ASSERT_TRUE(im_end.has_value());
  EXPECT_TRUE(tok->is_special(*im_end));
  EXPECT_EQ(tok->token_text(*im_end), "<|im_end|>");
  const auto think = tok->token_id("<think>");
  ASSERT_TRUE(think.has_value());
  EXPECT_FALSE(tok->is_special(*think));
  EXPECT_FALSE(tok->token_id("no such token").has_value());
  EXPECT_EQ(tok->encode("a<|im_end|>b", false).size(), 3u);
  // skip_special drops <|im_end|> but keeps the non-special <think>.
  EXPECT_EQ(tok->decode(tok->encode("<think>x<|im_end|>", false), true), "<think>x");
}

TEST(BpeTokenizer, InvalidUtf8InputRoundTrips) {
  auto tok = load_tokenizer(test::tokenizer_data_dir() + "/bpe_gpt2/tokenizer.json");
  const std::string bad = "ok \xC3 \xFF\xFE end \xE2\x82";
  EXPECT_EQ(tok->decode_bytes(tok->encode(bad, false)), bad);
}

// A character with no token, no byte-fallback token and no unk token is
// dropped, as in Hugging Face's BPE (merge_word has no case for it); encoding
// a client's text never fails (it threw before; found by fuzz_gguf on a GGUF
// vocabulary without byte tokens).
TEST(BpeTokenizer, CharactersWithoutAnyTokenAreDropped) {
  const auto j = nlohmann::json::parse(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                                                      "merges": ["a b"]}})");
  BpeTokenizer tok(j);
  EXPECT_EQ(tok.encode("a\xC3\xA9" "b", false), (std::vector<int32_t>{2}));  // "a" "é" "b": é dropped, then a+b merge
  EXPECT_EQ(tok.encode("cab", false), (std::vector<int32_t>{2}));
  EXPECT_TRUE(tok.encode("xyz", false).empty());
}

TEST(TokenizerLoad, BadInputsAreClearErrors) {
  const fs::path tmp = fs::temp_directory_path() / "qserve_tokenizer_load_test";
  fs::create_directories(tmp);
  EXPECT_THROW(load_tokenizer((tmp / "missing").string()), Error);
  EXPECT_THROW(load_tokenizer(tmp.string()), Error);  // no tokenizer file
  auto write = [&](const std::string& s) {
    std::ofstream(tmp / "tokenizer.json") << s;
  };
  write("{not json");
  EXPECT_THROW(load_tokenizer(tmp.string()), Error);
  write(R"({"model": {"type": "WordPiece", "vocab": {}}})");
  EXPECT_THROW(load_tokenizer(tmp.string()), Error);
  write(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})");
  EXPECT_THROW(load_tokenizer(tmp.string()), Error);
  write(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Nope"}})");
  EXPECT_THROW(load_tokenizer(tmp.string()), Error);
  write(R"({"model": {"type": "BPE", "vocab": [1, 2], "merges": []}})");
  EXPECT_THROW(load_tokenizer(tmp.string()), Error);
  fs::remove_all(tmp);
}

TEST(TokenizerLoad, BosEosFromConfigs) {
  const fs::path tmp = fs::temp_directory_path() / "qserve_tokenizer_cfg_test";
  fs::create_directories(tmp);
  fs::copy_file(test::tokenizer_data_dir() + "/bpe_llama3/tokenizer.json", tmp / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(tmp / "tokenizer_config.json") << R"({"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|end_of_text|>"}})";
  std::ofstream(tmp / "generation_config.json") << R"({"eos_token_id": [1, 2]})";
  auto tok = load_tokenizer(tmp.string());
  EXPECT_EQ(tok->bos_id(), *tok->token_id("<|begin_of_text|>"));
  EXPECT_EQ(tok->eos_ids(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(tok->encode("x", true).front(), tok->bos_id());
  std::ofstream(tmp / "tokenizer_config.json") << R"({"bos_token": "<|begin_of_text|>", "add_bos_token": false})";
  EXPECT_EQ(load_tokenizer(tmp.string())->encode("x", true).size(), 1u);
  fs::remove_all(tmp);
}

// BOS / EOS ids a config names outside the vocabulary (or outside int32,
// which used to wrap into a small id) are ignored, BOS falls back to the next
// candidate: encode would otherwise put an id the model cannot embed into
// every prompt (found by fuzz_tokenizer_config).
TEST(TokenizerLoad, ConfigIdsOutsideTheVocabularyAreIgnored) {
  const fs::path tmp = fs::temp_directory_path() / "qserve_tokenizer_cfg_range_test";
  fs::create_directories(tmp);
  fs::copy_file(test::tokenizer_data_dir() + "/bpe_llama3/tokenizer.json", tmp / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(tmp / "generation_config.json") << R"({"bos_token_id": 4294967298, "eos_token_id": [-1, 2, 99999999]})";
  std::ofstream(tmp / "config.json") << R"({"bos_token_id": 3, "eos_token_id": 4294967297})";
  auto tok = load_tokenizer(tmp.string());
  EXPECT_EQ(tok->bos_id(), 3);
  EXPECT_EQ(tok->eos_ids(), (std::vector<int32_t>{2}));
  std::ofstream(tmp / "config.json") << R"({"bos_token_id": 99999999})";
  tok = load_tokenizer(tmp.string());
  EXPECT_TRUE(tok->bos_id() == -1 || (tok->bos_id() >= 0 && tok->bos_id() < tok->vocab_size())) << tok->bos_id();
  for (int32_t id : tok->encode("x", true)) EXPECT_LT(id, tok->vocab_size());
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace qserve

namespace qserve {
namespace {

TEST(TokenizerNfc, MatchesPythonUnicodedata) {
  // Expected values from Python's unicodedata.normalize("NFC", ...).
  EXPECT_EQ(unicode::to_nfc("e\xcc\x81 A\xcc\x8a \xe2\x84\xab \xe2\x84\xa6 a\xcc\xa8\xcc\x81 q\xcc\x87\xcc\xa3"),
            "\xc3\xa9 \xc3\x85 \xc3\x85 \xce\xa9 \xc4\x85\xcc\x81 q\xcc\xa3\xcc\x87");
  EXPECT_EQ(unicode::to_nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 \xea\xb0\x80\xe1\x86\xa8 a\xd6\xae\xcc\x80\xcc\x81"
                            "b"),
            "\xea\xb0\x81 \xea\xb0\x81 \xc3\xa0\xd6\xae\xcc\x81"
            "b");
  EXPECT_EQ(unicode::to_nfc("\xe0\xbd\xb3 \xcd\x84 \xef\xa4\x80 e\xcc\x82\xcc\x81"),
            "\xe0\xbd\xb1\xe0\xbd\xb2 \xcc\x88\xcc\x81 \xe8\xb1\x88 \xe1\xba\xbf");
  EXPECT_EQ(unicode::to_nfc("plain ASCII"), "plain ASCII");
  EXPECT_EQ(unicode::to_nfc("bad \xcc"), "bad \xcc");  // invalid UTF-8: unchanged
}

}  // namespace
}  // namespace qserve
