// qserve quantize [--model IN] --out DIR --precision P [QoQ switches]
// The offline QoQ quantizer (src/quant/quantizer.h); docs/qoq-quantizer.md.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/calibration_text.h"
#include "cli/model_path.h"
#include "model/default_model.h"
#include "core/error.h"
#include "model/checkpoint.h"
#include "quant/quantizer.h"
#include <random>


namespace qserve::cli {
namespace {

struct QuantizeArgs {
  std::string model, out, precision = "w4a8kv4", calib_text;
  int64_t group = 128, calib_samples = 32, calib_seqlen = 512;
  bool no_rotate = false, no_smooth_attn = false, no_smooth = false, no_reorder = false, no_clip = false;
  bool rotate_values = false, quantized_stream = false, stream_numerics = false, smooth_attn_mean = false;
  double smooth_attn_alpha = 0.5, smoothquant_alpha = 0.5;
  bool smoothquant = false, calib_random = false, gptq = false, gptq_no_act_order = false;
  bool gptq_sequential = false, gptq_fp_target = false, gptq_clip_search = false;
  std::vector<float> gptq_clip_ratios = {1.0f, 0.95f, 0.9f, 0.85f, 0.8f};
  int64_t gptq_rows = 4096;
  double gptq_damp = 0.01, gptq_row_cap = 0;
  double smooth_alpha = 0.2;
  bool quiet = false;
};

// "\r[ 12/30] ########............ calibrate" on a terminal, one line per layer otherwise.
void draw_progress(int64_t layer, int64_t layers, const std::string& stage, bool tty) {
  if (layer < 0) {
    if (tty) std::fprintf(stderr, "\r\033[K[quantize] %s", stage.c_str());
    else std::fprintf(stderr, "[quantize] %s\n", stage.c_str());
    std::fflush(stderr);
    return;
  }
  if (tty) {
    constexpr int kWidth = 30;
    const int done = static_cast<int>(kWidth * layer / std::max<int64_t>(1, layers));
    std::fprintf(stderr, "\r\033[K[quantize] layer %3lld/%lld [%s%s] %s", static_cast<long long>(layer + 1),
                 static_cast<long long>(layers), std::string(done, '#').c_str(), std::string(kWidth - done, '.').c_str(),
                 stage.c_str());
  } else if (stage == "load") {
    std::fprintf(stderr, "[quantize] layer %lld/%lld\n", static_cast<long long>(layer + 1), static_cast<long long>(layers));
  }
  std::fflush(stderr);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto* sub = app.add_subcommand("quantize", "Quantize a model with QoQ (W4A8KV4 and baselines) into a new checkpoint");
  auto a = std::make_shared<QuantizeArgs>();
  sub->add_option("--model", a->model, "Input model: Hugging Face directory or .gguf (default: the default model)")
      ->envname("QSERVE_MODEL");
  sub->add_option("--out", a->out, "Output directory")->required();
  sub->add_option("--precision", a->precision, "w4a8kv4 | w4a8kv8 | w8a8kv8 | w4a16 | fp16")->capture_default_str();
  sub->add_option("--group-size", a->group, "Weight group size: 128, or -1 for per channel (w4a8 only)")
      ->capture_default_str();
  sub->add_option("--calib-text", a->calib_text, "Calibration text file (never the evaluation text)");
  sub->add_option("--calib-samples", a->calib_samples, "Calibration sequences")->capture_default_str();
  sub->add_option("--calib-seqlen", a->calib_seqlen, "Tokens per calibration sequence")->capture_default_str();
  sub->add_flag("--calib-random-tokens", a->calib_random,
                "Calibrate on uniformly random token ids (synthetic models without a tokenizer; memory and speed only)");
  sub->add_flag("--no-rotate", a->no_rotate, "Skip the block-input Hadamard rotation (and the norm folding it needs)");
  sub->add_flag("--no-smooth-attn", a->no_smooth_attn, "Skip SmoothAttention");
  sub->add_flag("--no-smooth", a->no_smooth, "Skip the block-output smoothing (o/v, down)");
  sub->add_flag("--no-reorder", a->no_reorder, "Skip the activation-aware channel reorder (g128)");
  sub->add_flag("--no-clip", a->no_clip, "Skip the weight clipping search");
  sub->add_flag("--rtn", [a](int64_t) { a->no_rotate = a->no_smooth_attn = a->no_smooth = a->no_reorder = a->no_clip = true; },
                "Round to nearest: every QoQ step off");
  sub->add_flag("--gptq", a->gptq, "GPTQ error compensation: codes chosen column by column against H = X^T X of the calibration inputs");
  sub->add_flag("--gptq-no-act-order", a->gptq_no_act_order, "GPTQ columns left to right instead of by descending activation energy");
  sub->add_option("--gptq-damp", a->gptq_damp, "GPTQ damping, relative to the mean of diag(H)")->capture_default_str();
  sub->add_option("--gptq-row-cap", a->gptq_row_cap,
                  "GPTQ: rows of H with a squared norm above C x the median are scaled down to it (0: off)")
      ->capture_default_str();
  sub->add_flag("--gptq-sequential", a->gptq_sequential,
                "GPTQ stage by stage inside each block (q/k/v, o, gate/up, down), each on the inputs of the quantized "
                "stages before it (implies --gptq)");
  sub->add_flag("--gptq-clip-search", a->gptq_clip_search,
                "GPTQ-aware clipping (g128): per output row, GPTQ on the searched clip and on uniform clips "
                "(1.0 to 0.8), the one with the least output error kept (implies --gptq)");
  sub->add_option("--gptq-clip-ratios", a->gptq_clip_ratios, "The uniform clip ratios the clip search tries (in (0, 1])")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_flag("--gptq-fp-target", a->gptq_fp_target,
                "GPTQ towards the FP model's outputs on the same tokens, not the FP weights on the quantized model's "
                "inputs (asymmetric calibration; implies --gptq)");
  sub->add_option("--gptq-rows", a->gptq_rows, "Calibration rows per linear input used for GPTQ's H")->capture_default_str();
  sub->add_flag("--smoothquant", a->smoothquant, "SmoothQuant input smoothing into the RMSNorm gains");
  sub->add_option("--smoothquant-alpha", a->smoothquant_alpha, "Migration strength of the SmoothQuant input smoothing")
      ->capture_default_str();
  sub->add_option("--smooth-attn-alpha", a->smooth_attn_alpha, "SmoothAttention exponent (lambda = max|K|^alpha)")
      ->capture_default_str();
  sub->add_flag("--smooth-attn-mean", a->smooth_attn_mean,
                "SmoothAttention scales from the mean |K| of each channel instead of its max |K|");
  sub->add_flag("--rotate-values", a->rotate_values,
                "Hadamard rotation inside each KV head on v_proj rows and o_proj columns (flatter V for KV4 and o_proj inputs)");
  sub->add_flag("--quantized-stream", a->quantized_stream,
                "Calibrate each block on the previous blocks' quantized outputs instead of the FP ones");
  sub->add_flag("--quantized-stream-numerics", a->stream_numerics,
                "With --quantized-stream: that stream also has the run time's INT8 activations and KV quantization (implies --quantized-stream)");
  sub->add_option("--smooth-alpha", a->smooth_alpha, "Migration strength of the output smoothing")->capture_default_str();
  sub->add_flag("-q,--quiet", a->quiet, "No progress output");
  set_command_body(sub, [a]() -> int {
    const std::string model = resolve_model_path(a->model);
    quant::QuantizeOptions opt;
    opt.precision = quant::parse_precision(a->precision);
    if (a->group != 128 && a->group != -1 && (a->group <= 0 || a->group % 2))
      fail(ErrorCode::kInvalidArgument, "--group-size must be 128, -1 or another even size, not {}", a->group);
    opt.group = a->group;
    opt.rotate = !a->no_rotate;
    opt.smooth_attention = !a->no_smooth_attn;
    opt.smooth_output = !a->no_smooth;
    opt.reorder = !a->no_reorder && a->group > 0;
    opt.clip = !a->no_clip;
    opt.smooth_input = a->smoothquant;
    opt.gptq = a->gptq || a->gptq_sequential || a->gptq_fp_target || a->gptq_clip_search;
    opt.gptq_clip_search = a->gptq_clip_search;
    for (float r : a->gptq_clip_ratios)
      if (!(r > 0 && r <= 1)) fail(ErrorCode::kInvalidArgument, "--gptq-clip-ratios: {} is not in (0, 1]", r);
    opt.gptq_clip_ratios = a->gptq_clip_ratios;
    opt.gptq_sequential = a->gptq_sequential;
    opt.gptq_fp_target = a->gptq_fp_target;
    opt.gptq_act_order = !a->gptq_no_act_order;
    if (!(a->gptq_damp > 0)) fail(ErrorCode::kInvalidArgument, "--gptq-damp must be positive, not {}", a->gptq_damp);
    opt.gptq_damp = a->gptq_damp;
    if (a->gptq_row_cap < 0) fail(ErrorCode::kInvalidArgument, "--gptq-row-cap must be >= 0, not {}", a->gptq_row_cap);
    opt.gptq_row_cap = a->gptq_row_cap;
    opt.gptq_rows = std::max<int64_t>(1, a->gptq_rows);
    opt.smooth_output_alpha = a->smooth_alpha;
    opt.smooth_attention_alpha = a->smooth_attn_alpha;
    opt.smooth_attention_mean = a->smooth_attn_mean;
    opt.smooth_input_alpha = a->smoothquant_alpha;
    opt.rotate_values = a->rotate_values;
    opt.quantized_stream = a->quantized_stream || a->stream_numerics;
    opt.stream_numerics = a->stream_numerics;
    auto ckpt = open_checkpoint(model);
    const bool need_calib = opt.precision != quant::Precision::kFP16 &&
                            (opt.smooth_attention || opt.smooth_output || opt.smooth_input || opt.reorder || opt.clip || opt.gptq);
    if (need_calib && a->calib_random) {
      std::mt19937 rng(0);
      const int64_t vocab = ckpt->config().value("vocab_size", int64_t{1});
      opt.calibration.assign(a->calib_samples, std::vector<int32_t>(a->calib_seqlen));
      for (auto& s : opt.calibration)
        for (auto& t : s) t = static_cast<int32_t>(rng() % vocab);
      opt.calibration_name = "random tokens";
    } else if (need_calib) {
      if (a->calib_text.empty())
        fail(ErrorCode::kInvalidArgument, "--calib-text is required by the QoQ steps (or pass --rtn)");
      const std::vector<int32_t> ids = tokenize_text(model, read_text_file(a->calib_text), /*add_special=*/false);
      opt.calibration = calibration_windows(ids, a->calib_samples, a->calib_seqlen);
      const size_t slash = a->calib_text.find_last_of('/');
      opt.calibration_name = slash == std::string::npos ? a->calib_text : a->calib_text.substr(slash + 1);
    }
    const bool tty = !a->quiet && isatty(STDERR_FILENO);
    if (!a->quiet) opt.progress = [tty](int64_t l, int64_t n, const std::string& s) { draw_progress(l, n, s, tty); };
    const quant::QuantizeReport rep = quant::quantize_checkpoint(*ckpt, a->out, opt);
    if (tty) std::fprintf(stderr, "\n");
    double kb = 0, ka = 0;
    for (const auto& l : rep.layers) kb = std::max(kb, l.key_outlier_before), ka = std::max(ka, l.key_outlier_after);
    std::printf("%s\n", fmt::format("quantized {} -> {} ({}{}) in {:.1f} s, peak RSS {:.0f} MiB", model, a->out, a->precision,
                                    a->group > 0 ? fmt::format(" g{}", a->group) : std::string(" per-channel"),
                                    rep.seconds, peak_rss_bytes() / 1048576.0)
                            .c_str());
    if (!rep.layers.empty() && ka > 0)
      std::printf("key max/median over channels (worst layer): %.2f before SmoothAttention, %.2f after\n", kb, ka);
    if (opt.gptq && !rep.layers.empty()) {
      double r = 0;
      for (const auto& l : rep.layers) r += l.gptq_error_ratio;
      std::printf("GPTQ: layer output error / round-to-nearest error on the calibration rows, mean over layers: %.3f\n",
                  r / static_cast<double>(rep.layers.size()));
    }
    return 0;
  });
}

}  // namespace qserve::cli
