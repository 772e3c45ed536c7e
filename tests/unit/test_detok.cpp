// Incremental detokenization (IncrementalDecoder) and the engine's output
// path (OutputProcessor over TokenizerCodec) on real tokenizers: streamed text
// equals the full decode, no split UTF-8 character is ever emitted, stop
// strings that span tokens are cut exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/output_processor.h"
#include "engine/tokenizer_codec.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace qserve {
namespace {

const std::vector<std::string> kTexts = {
    "Hello world",
    " leading space and  double  spaces ",
    "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 \xE2\x82\xAC 100",
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88",
    "emoji \xF0\x9F\x99\x82 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD end",
    "lines\n\nwith\ttabs\r\n",
    "special <|im_start|>user\nHi<|im_end|>\n",
};

std::shared_ptr<const Tokenizer> load(const std::string& name) {
  if (name == "llama2_spm") {
    const std::string p = test::shared_data_dir() + "/tokenizers/llama2/tokenizer.model";
    if (!std::filesystem::exists(p)) return nullptr;
    return load_tokenizer(p);
  }
  return load_tokenizer(test::tokenizer_data_dir() + "/" + name + "/tokenizer.json");
}

bool valid_utf8(const std::string& s) { return unicode::utf8_valid_prefix(s) == s.size(); }

// Streams `ids` and checks every piece and the total.
void check_stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDecoder dec(tok, skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = dec.step(id);
    EXPECT_TRUE(valid_utf8(piece)) << "emitted invalid UTF-8 after id " << id;
    streamed += piece;
  }
  streamed += dec.flush();
  EXPECT_EQ(streamed, tok.decode(ids, skip_special)) << test::ids_str(ids);
}

class DetokStream : public ::testing::TestWithParam<std::string> {};

TEST_P(DetokStream, ConcatenationEqualsDecode) {
  auto tok = load(GetParam());
  if (!tok) GTEST_SKIP() << "skipped: the Llama-2 tokenizer.model is not in the shared data";
  for (const auto& text : kTexts) {
    const auto ids = tok->encode(text, true);
    check_stream(*tok, ids, false);
    check_stream(*tok, ids, true);
  }
  // Real text, when the shared data is present.
  const std::string wiki = test::shared_data_dir() + "/text/wiki.test.raw";
  if (std::filesystem::exists(wiki)) {
    const auto lines = test::split_lines(test::read_file(wiki));
    std::string chunk;
    for (size_t i = 0; i < 400 && i < lines.size(); ++i) chunk += lines[i] + "\n";
    check_stream(*tok, tok->encode(chunk, false), false);
  }
}

TEST_P(DetokStream, PromptGivesContextOnly) {
  auto tok = load(GetParam());
  if (!tok) GTEST_SKIP() << "skipped: the Llama-2 tokenizer.model is not in the shared data";
  const auto prompt = tok->encode("The capital of France is", true);
  const auto gen = tok->encode(" Paris, a city of \xE2\x82\xAC and caf\xC3\xA9s.", false);
  IncrementalDecoder dec(*tok, prompt, false);
  std::string streamed;
  for (int32_t id : gen) streamed += dec.step(id);
  streamed += dec.flush();
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), gen.begin(), gen.end());
  const std::string full = tok->decode(all), head = tok->decode(prompt);
  ASSERT_EQ(full.compare(0, head.size(), head), 0);
  EXPECT_EQ(streamed, full.substr(head.size()));
}

INSTANTIATE_TEST_SUITE_P(Detok, DetokStream,
                         ::testing::Values("bpe_gpt2", "bpe_llama3", "bpe_bytefallback", "bpe_metaspace", "llama2_spm"));

TEST(DetokStream, HoldsBackSplitCharacters) {
  // Byte fallback: an emoji outside the vocabulary (U+1F98A) is byte tokens.
  auto tok = load("bpe_bytefallback");
  const std::string emoji = "\xF0\x9F\xA6\x8A";
  const auto ids = tok->encode(emoji, false);
  ASSERT_GE(ids.size(), 3u);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(tok->token_text(ids[i]).substr(0, 3), "<0x");
  IncrementalDecoder dec(*tok);
  std::string got;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = dec.step(ids[i]);
    if (i + 1 < ids.size()) {
      EXPECT_EQ(piece.find("\xF0"), std::string::npos) << "byte " << i << " emitted early";
    }
    got += piece;
  }
  EXPECT_EQ(got + dec.flush(), tok->decode(ids));
  EXPECT_NE(got.find(emoji), std::string::npos);
}

TEST(DetokStream, RandomIdsMatchDecode) {
  // Arbitrary byte-level ids form invalid UTF-8 too: the stream still equals
  // decode() (U+FFFD where the bytes are invalid) and each piece is valid.
  auto tok = load("bpe_gpt2");
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, tok->vocab_size() - 1);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<int32_t> ids(1 + rep % 17);
    for (auto& x : ids) x = id(rng);
    check_stream(*tok, ids, false);
  }
}

TEST(DetokStream, LeadingSpaceOfSentencePiece) {
  auto tok = load("llama2_spm");
  if (!tok) GTEST_SKIP() << "skipped: the Llama-2 tokenizer.model is not in the shared data";
  const auto ids = tok->encode("Hello world", false);
  IncrementalDecoder dec(*tok);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(dec.step(ids[0]), "Hello");
  EXPECT_EQ(dec.step(ids[1]), " world");
}

// ---- stop conditions on real tokens (OutputProcessor + TokenizerCodec) ----

struct StreamRun {
  std::string text;
  FinishReason reason = FinishReason::kNone;
  std::string stop_reason;
  int tokens = 0;
  std::vector<std::string> texts;  // the text of each output
};

StreamRun run_output(const TokenizerCodec& codec, const std::vector<int32_t>& gen, GenerationParams p, int max_new) {
  OutputProcessor proc(p, max_new, codec.eos_ids(), codec.start_stream({}, p.skip_special_tokens));
  StreamRun r;
  for (int32_t id : gen) {
    RequestOutput out;
    const bool done = proc.on_token(id, out);
    r.text += out.text;
    r.texts.push_back(out.text);
    ++r.tokens;
    if (done) {
      r.reason = out.finish_reason;
      r.stop_reason = out.stop_reason;
      break;
    }
  }
  return r;
}

TEST(DetokStopStrings, CutAcrossTokenBoundaries) {
  auto codec = std::make_shared<TokenizerCodec>(load("bpe_llama3"));
  const std::string text = "The answer is 42.\nEND of the story, more text follows";
  const auto gen = codec->encode(text, false);
  GenerationParams p;
  p.stop = {"\nEND"};
  const StreamRun r = run_output(*codec, gen, p, 1000);
  EXPECT_EQ(r.text, "The answer is 42.");
  EXPECT_EQ(r.reason, FinishReason::kStop);
  EXPECT_EQ(r.stop_reason, "\nEND");
  EXPECT_LT(r.tokens, static_cast<int>(gen.size()));
  // Text that may begin the stop string is held back: no output ends in "\n" or "\nE".
  for (const auto& t : r.texts) EXPECT_TRUE(t.empty() || t.back() != '\n') << "'" << t << "'";

  // A stop string inside one token and across several, with the string kept.
  p.stop = {"swer is 4"};
  p.include_stop_str_in_output = true;
  EXPECT_EQ(run_output(*codec, gen, p, 1000).text, "The answer is 4");
}

TEST(DetokStopStrings, MultiByteStopAndUnmatchedPrefix) {
  auto codec = std::make_shared<TokenizerCodec>(load("bpe_bytefallback"));
  const std::string text = "smile \xF0\x9F\x99\x82 ok \xF0\x9F\x91\x8D done";
  const auto gen = codec->encode(text, false);
  GenerationParams p;
  p.stop = {"\xF0\x9F\x91\x8D"};  // the second emoji, split over byte tokens
  const StreamRun r = run_output(*codec, gen, p, 1000);
  EXPECT_EQ(r.text, "smile \xF0\x9F\x99\x82 ok ");
  EXPECT_EQ(r.reason, FinishReason::kStop);
  // A stop string that never completes: everything comes out, finish "length".
  p.stop = {"ok \xF0\x9F\x91\x8D!"};
  const StreamRun all = run_output(*codec, gen, p, static_cast<int>(gen.size()));
  EXPECT_EQ(all.text, text);
  EXPECT_EQ(all.reason, FinishReason::kLength);
}

TEST(DetokStopStrings, StopIdsAndMaxTokens) {
  auto codec = std::make_shared<TokenizerCodec>(load("bpe_qwen2"));
  const int32_t im_end = *codec->tokenizer().token_id("<|im_end|>");
  auto gen = codec->encode("one two three", false);
  gen.push_back(im_end);
  gen.push_back(codec->encode(" after", false)[0]);
  GenerationParams p;
  p.stop_token_ids = {im_end};
  StreamRun r = run_output(*codec, gen, p, 1000);
  EXPECT_EQ(r.text, "one two three");
  EXPECT_EQ(r.reason, FinishReason::kStop);
  EXPECT_STREQ(finish_reason_name(r.reason), "stop");
  r = run_output(*codec, gen, GenerationParams{}, 2);
  EXPECT_EQ(r.tokens, 2);
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_STREQ(finish_reason_name(r.reason), "length");
  EXPECT_EQ(r.text, codec->decode(std::vector<int32_t>(gen.begin(), gen.begin() + 2), true));
}

}  // namespace
}  // namespace qserve
