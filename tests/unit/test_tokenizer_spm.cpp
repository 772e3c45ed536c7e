// SentencePiece (Llama-2 tokenizer.model) against the `sentencepiece` library
// (reference ids: scripts/dump_tokenizer_reference.py --sentencepiece).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer_test_util.h"

namespace qserve {
namespace {

std::string llama2_model() { return test::shared_data_dir() + "/tokenizers/llama2/tokenizer.model"; }

TEST(SentencePieceLlama2, MatchesReference) {
  if (!std::filesystem::exists(llama2_model())) GTEST_SKIP() << "skipped: " << llama2_model() << " not found";
  auto tok = load_tokenizer(llama2_model());
  test::check_against_reference(*tok, test::load_reference(test::tokenizer_data_dir() + "/llama2_spm/reference.json"),
                                /*check_decoded_plain=*/false);
}

TEST(SentencePieceLlama2, Conventions) {
  if (!std::filesystem::exists(llama2_model())) GTEST_SKIP() << "skipped: " << llama2_model() << " not found";
  auto tok = load_tokenizer(llama2_model());
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_TRUE(tok->is_special(1));
  EXPECT_FALSE(tok->is_special(15043));
  EXPECT_EQ(tok->token_text(13), "<0x0A>");
  EXPECT_EQ(tok->token_id("<0x0A>"), 13);
  EXPECT_EQ(tok->token_id("\xE2\x96\x81Hello"), 15043);
  EXPECT_FALSE(tok->token_id("no-such-piece").has_value());
  // Byte fallback: a character outside the vocabulary becomes its UTF-8 bytes.
  const auto ids = tok->encode("\xF0\x9F\x99\x82", false);  // U+1F642
  EXPECT_EQ(tok->decode(ids), "\xF0\x9F\x99\x82");
  // Control pieces decode as text unless skipped (as LlamaTokenizerFast does).
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 15043}), "<s> Hello");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 15043}, true), "Hello");
}

TEST(SentencePieceLoad, CorruptModelIsAnError) {
  const auto path = std::filesystem::temp_directory_path() / "qserve_bad_tokenizer.model";
  std::ofstream(path) << "not a protobuf";
  EXPECT_THROW(load_tokenizer(path.string()), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace qserve
