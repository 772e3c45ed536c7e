// qserve eval ppl [--model M] --text FILE [--seqlen 2048] [--max-windows N] [--json]
// Perplexity with the GPTQ / AWQ / QServe protocol (docs/qoq-spec.md section 7):
// the text tokenized once (with the tokenizer's special tokens, as
// tokenizer(text) does), cut into non-overlapping windows of seqlen tokens (the
// tail dropped), each window run from an empty cache; mean NLL over every
// predicted token (seqlen - 1 per window), exp.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/calibration_text.h"
#include "cli/model_path.h"
#include "model/default_model.h"
#include "core/error.h"
#include "engine/llama_model.h"
#include "engine/logprobs.h"
#include "model/checkpoint.h"
#include "quant/qoq_checkpoint.h"

namespace qserve::cli {
namespace {

struct EvalArgs {
  std::string model, text;
  int64_t seqlen = 2048, max_windows = 0;
  bool json = false;
};

int run_ppl(const EvalArgs& a) {
  const std::string model_path = resolve_model_path(a.model);
  if (a.seqlen < 2) fail(ErrorCode::kInvalidArgument, "--seqlen must be at least 2, not {}", a.seqlen);
  const std::vector<int32_t> ids = tokenize_text(model_path, read_text_file(a.text), /*add_special=*/true);
  int64_t windows = static_cast<int64_t>(ids.size()) / a.seqlen;
  if (windows == 0)
    fail(ErrorCode::kInvalidArgument, "{} has {} tokens, fewer than one window of {}", a.text, ids.size(), a.seqlen);
  const int64_t all_windows = windows;
  if (a.max_windows > 0) windows = std::min(windows, a.max_windows);

  auto ckpt = open_checkpoint(model_path);
  const std::string precision = quant::is_qoq_checkpoint(ckpt->config())
                                    ? ckpt->config()["quantization_config"].value("precision", "?")
                                    : std::string("fp (unquantized)");
  LlamaModelOptions mo;
  mo.page_size = 64;
  auto model = LlamaModel::load(*ckpt, mo);
  const bool tty = !a.json && isatty(STDERR_FILENO);
  double nll = 0, seconds = 0;
  int64_t predicted = 0;
  for (int64_t w = 0; w < windows; ++w) {
    Batch b;
    b.seqs.push_back({w, std::vector<int32_t>(ids.begin() + w * a.seqlen, ids.begin() + (w + 1) * a.seqlen), 0});
    b.all_logits = true;
    Logits out;
    const auto t0 = std::chrono::steady_clock::now();
    model->forward(b, out);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    model->release(w);
    for (int64_t t = 0; t + 1 < a.seqlen; ++t) nll += token_nll(out.all_row(t), b.seqs[0].tokens[t + 1]);
    predicted += a.seqlen - 1;
    if (tty) {
      std::fprintf(stderr, "\r\033[K[eval] window %lld/%lld  ppl %.4f  %.0f tok/s", static_cast<long long>(w + 1),
                   static_cast<long long>(windows), std::exp(nll / predicted), (w + 1) * a.seqlen / seconds);
      std::fflush(stderr);
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  const double ppl = std::exp(nll / predicted);
  const double tps = windows * a.seqlen / seconds;
  if (a.json) {
    nlohmann::json j = {{"ppl", ppl},          {"nll", nll / predicted}, {"tokens", predicted},
                        {"windows", windows},  {"windows_total", all_windows}, {"seqlen", a.seqlen},
                        {"tokens_per_s", tps}, {"seconds", seconds}, {"model", model_path},
                        {"precision", precision}, {"text", a.text}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s\n", fmt::format("ppl {:.4f} over {} predicted tokens ({} of {} windows of {}), {} | {:.1f} tokens/s",
                                    ppl, predicted, windows, all_windows, a.seqlen, precision, tps)
                            .c_str());
  }
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto* sub = app.add_subcommand("eval", "Evaluate a model (perplexity)");
  sub->require_subcommand(1);
  auto* ppl = sub->add_subcommand("ppl", "Perplexity of a text (GPTQ/AWQ/QServe protocol: non-overlapping windows)");
  auto a = std::make_shared<EvalArgs>();
  ppl->add_option("--model", a->model, "Model: Hugging Face directory (quantized or not) or .gguf")->envname("QSERVE_MODEL");
  ppl->add_option("--text", a->text, "Text file (e.g. WikiText-2 test rows joined with \\n\\n)")->required();
  ppl->add_option("--seqlen", a->seqlen, "Tokens per window")->capture_default_str();
  ppl->add_option("--max-windows", a->max_windows, "Evaluate only the first N windows (0: all)")->capture_default_str();
  ppl->add_flag("--json", a->json, "One JSON line: ppl, nll, tokens, windows, seqlen, tokens_per_s, ...");
  set_command_body(ppl, [a]() -> int { return run_ppl(*a); });
}

}  // namespace qserve::cli
