#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace qserve {

namespace {
// The decoder of Llama-2's tokenizer.json: "▁" -> " ", byte pieces -> bytes,
// then the leading space of the dummy prefix removed.
constexpr const char* kLlamaDecoder = R"({"type": "Sequence", "decoders": [
  {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
  {"type": "ByteFallback"}, {"type": "Fuse"},
  {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})";
constexpr const char* kNoPrefixDecoder = R"({"type": "Sequence", "decoders": [
  {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
  {"type": "ByteFallback"}, {"type": "Fuse"}]})";
}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  if (!std::filesystem::exists(model_path)) fail(ErrorCode::kNotFound, "{} does not exist", model_path);
  const auto status = sp_->Load(model_path);
  if (!status.ok()) fail(ErrorCode::kCorruptData, "{}: not a SentencePiece model ({})", model_path, status.ToString());
  bos_id_ = sp_->bos_id();
  if (sp_->eos_id() >= 0) eos_ids_ = {sp_->eos_id()};

  // add_dummy_prefix is in the model's normalizer spec; its effect shows on "a".
  std::vector<std::string> pieces;
  (void)sp_->Encode("a", &pieces);
  const bool dummy_prefix = !pieces.empty() && pieces[0].rfind("\xE2\x96\x81", 0) == 0;
  decoder_ = make_decoder(nlohmann::json::parse(dummy_prefix ? kLlamaDecoder : kNoPrefixDecoder));

  std::vector<AddedToken> specials;
  for (int id = 0; id < sp_->GetPieceSize(); ++id) {
    if (sp_->IsControl(id) || sp_->IsUnknown(id)) {
      AddedToken t;
      t.id = id;
      t.content = sp_->IdToPiece(id);
      t.normalized = false;
      t.special = true;
      specials.push_back(std::move(t));
    }
  }
  specials_ = AddedTokenMatcher(std::move(specials));
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special && add_bos_ && bos_id_ >= 0) ids.push_back(bos_id_);
  std::vector<int> piece_ids;
  for (const AddedSplit& s : specials_.split(text)) {
    if (s.token_id >= 0) {
      ids.push_back(s.token_id);
      continue;
    }
    piece_ids.clear();
    const auto status = sp_->Encode(absl::string_view(text.data() + s.begin, s.end - s.begin), &piece_ids);
    if (!status.ok()) fail(ErrorCode::kInternal, "sentencepiece: {}", status.ToString());
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  if (add_special && add_eos_ && !eos_ids_.empty()) ids.push_back(eos_ids_.front());
  return ids;
}

std::string SentencePieceTokenizer::decode_impl(std::span<const int32_t> ids, bool skip_special,
                                                bool raw_tail) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= sp_->GetPieceSize()) continue;
    if (skip_special && is_special(id)) continue;
    tokens.push_back(sp_->IdToPiece(id));
  }
  decoder_->decode_chain(tokens, raw_tail);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

int32_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::optional<int32_t> SentencePieceTokenizer::token_id(std::string_view token) const {
  const int id = sp_->PieceToId(absl::string_view(token.data(), token.size()));
  if (id < 0 || (sp_->IsUnknown(id) && sp_->IdToPiece(id) != token)) return std::nullopt;
  return id;
}

std::string SentencePieceTokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) return "";
  return sp_->IdToPiece(id);
}

bool SentencePieceTokenizer::is_special(int32_t id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) return false;
  return sp_->IsControl(id) || sp_->IsUnknown(id);
}

}  // namespace qserve
