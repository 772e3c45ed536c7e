// qserve eval compare [--model M] --device cuda [--device D2 ...] [--reference cpu] --text FILE
//                     [--control D ...] [--strict] [--save-reference F | --load-reference F]
//                     [--seqlen 512] [--max-windows 4] [--prompts FILE] [--max-new-tokens 64] [--json]
//
// One checkpoint on two backends, token by token: the device under test
// against the reference (the CPU backend: FP32 for float checkpoints, the
// integer oracle of the contract for quantized ones).
//  - Teacher forcing over windows of the text: top-1 agreement of the two
//    backends at every position, and each backend's perplexity.
//  - Greedy decoding of each prompt on both: the first position where the
//    outputs differ, with the reference's top-2 logit margin there (a
//    divergence where the margin is within FP16 noise is a tie, not a bug).
//  - A verdict per device (cli/compare_verdict.h): against the fixed
//    thresholds (top-1 >= 99%, ppl within 0.5%), or, with --control runs
//    (the reference perturbed, e.g. cpu-fp16:all,mantissa=22), against the
//    spread those controls show, which is what a quantized checkpoint allows.
//  - The reference side (and the controls) can be saved to a file and loaded
//    on another machine (cli/compare_reference.h): the CPU reference of 32
//    windows takes minutes, the device's own run seconds.
// This is the acceptance check of a device backend on a real model
// (docs/serving-benchmark.md, docs/cuda-backend.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/calibration_text.h"
#include "cli/compare_reference.h"
#include "cli/compare_verdict.h"
#include "cli/model_path.h"
#include "core/error.h"
#include "engine/backend_factory.h"
#include "engine/llama_model.h"
#include "engine/logprobs.h"
#include "model/checkpoint.h"
#include "model/default_model.h"

namespace qserve::cli {
namespace {

struct CompareArgs {
  std::string model, reference = "cpu", text, prompts, save_reference, load_reference;
  std::vector<std::string> devices = {"cuda"};
  std::vector<std::string> controls;  // perturbed references: the spread the verdict allows
  int64_t seqlen = 512, max_windows = 4, max_new_tokens = 64;
  bool json = false, strict = false;
};

const std::vector<std::string> kDefaultPrompts = {
    "The capital of France is",
    "Here is a short story about a robot who learns to paint:",
    "def fibonacci(n):",
    "Explain why the sky is blue in two sentences.",
};

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Largest minus second-largest logit.
float top2_margin(std::span<const float> v) {
  float a = -INFINITY, b = -INFINITY;
  for (float x : v) {
    if (x > a) {
      b = a;
      a = x;
    } else if (x > b) {
      b = x;
    }
  }
  return a - b;
}

// Greedy continuation of `prompt`; margins[i] = top-2 margin of the logits that chose out[i].
std::vector<int32_t> greedy(LlamaModel& model, int64_t seq, const std::vector<int32_t>& prompt, int64_t n,
                            std::vector<float>* margins) {
  std::vector<int32_t> out;
  Batch b;
  b.seqs.push_back({seq, prompt, 0});
  Logits logits;
  for (int64_t i = 0; i < n; ++i) {
    model.forward(b, logits);
    const int32_t next = argmax(logits.row(0));
    if (margins) margins->push_back(top2_margin(logits.row(0)));
    out.push_back(next);
    b.seqs[0].start += static_cast<int64_t>(b.seqs[0].tokens.size());
    b.seqs[0].tokens = {next};
  }
  model.release(seq);
  return out;
}

std::vector<std::string> read_prompts(const std::string& path) {
  if (path.empty()) return kDefaultPrompts;
  std::ifstream in(path);
  if (!in) fail(ErrorCode::kNotFound, "cannot read prompts file '{}'", path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  if (out.empty()) fail(ErrorCode::kInvalidArgument, "prompts file '{}' has no non-empty line", path);
  return out;
}

nlohmann::json compare_one(const std::string& path, const Checkpoint& ckpt, const CompareArgs& a,
                           const std::string& device, const ReferenceRuns& rr, const std::vector<std::string>& prompts) {
  LlamaModelOptions to;
  to.page_size = 16;
  to.device = device;
  auto dut = LlamaModel::load(ckpt, to);
  const int64_t vocab = dut->config().vocab_size;
  nlohmann::json report = {{"model", path}, {"device", device}, {"reference", a.reference}};

  // Teacher forcing.
  if (!rr.windows.empty()) {
    const int64_t windows = static_cast<int64_t>(rr.windows.size());
    double nll_ref = 0, nll_dut = 0, max_rel = 0;
    int64_t agree = 0, positions = 0;
    for (int64_t w = 0; w < windows; ++w) {
      Batch b;
      b.seqs.push_back({w, rr.windows[w], 0});
      b.all_logits = true;
      Logits ld;
      dut->forward(b, ld);
      dut->release(w);
      for (int64_t t = 0; t < a.seqlen; ++t) {
        const auto d = ld.all_row(t);
        agree += rr.top1[w][t] == argmax(d);
        ++positions;
        if (!rr.logits.empty()) {  // the full reference logits are here (not loaded from a file)
          const auto r = rr.logits[w].all_row(t);
          float scale = 0, diff = 0;
          for (int64_t v = 0; v < vocab; ++v) {
            scale = std::max(scale, std::fabs(r[v]));
            diff = std::max(diff, std::fabs(r[v] - d[v]));
          }
          max_rel = std::max(max_rel, static_cast<double>(diff / std::max(scale, 1e-6f)));
        }
        if (t + 1 < a.seqlen) {
          nll_ref += rr.nll[w][t];
          nll_dut += token_nll(d, rr.windows[w][t + 1]);
        }
      }
    }
    const int64_t predicted = windows * (a.seqlen - 1);
    const double ppl_ref = std::exp(nll_ref / predicted), ppl_dut = std::exp(nll_dut / predicted);
    report["teacher_forced"] = {{"windows", windows},
                                {"seqlen", a.seqlen},
                                {"positions", positions},
                                {"top1_agreement", static_cast<double>(agree) / positions},
                                {"ppl_reference", ppl_ref},
                                {"ppl_device", ppl_dut},
                                {"ppl_rel_diff", ppl_dut / ppl_ref - 1.0}};
    if (!rr.logits.empty()) report["teacher_forced"]["max_logit_diff_over_max_abs"] = max_rel;
  }

  // Greedy decoding.
  nlohmann::json greedy_rows = nlohmann::json::array();
  int64_t identical = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& r = rr.greedy[p];
    const auto d = greedy(*dut, 1000000 + p, rr.prompt_ids[p], a.max_new_tokens, nullptr);
    int64_t first = -1;
    for (size_t i = 0; i < r.size(); ++i)
      if (r[i] != d[i]) {
        first = static_cast<int64_t>(i);
        break;
      }
    identical += first < 0;
    nlohmann::json row = {{"prompt", prompts[p]}, {"tokens", r.size()}, {"identical", first < 0}};
    if (first >= 0) {
      row["first_divergence"] = first;
      row["reference_top2_margin_there"] = rr.margins[p][first];
    }
    greedy_rows.push_back(row);
  }
  report["greedy"] = {{"prompts", prompts.size()}, {"identical", identical}, {"rows", greedy_rows}};
  return report;
}

void print_report(const nlohmann::json& report) {
  std::printf("%s on %s vs %s%s\n", report["model"].get<std::string>().c_str(),
              report["device"].get<std::string>().c_str(), report["reference"].get<std::string>().c_str(),
              report.contains("role") ? " (control)" : "");
  if (report.contains("teacher_forced")) {
    const auto& t = report["teacher_forced"];
    std::printf("teacher forced: %lld positions, top-1 agreement %.4f, ppl %.4f (reference) vs %.4f (%+.3f%%)",
                static_cast<long long>(t["positions"].get<int64_t>()), t["top1_agreement"].get<double>(),
                t["ppl_reference"].get<double>(), t["ppl_device"].get<double>(), 100 * t["ppl_rel_diff"].get<double>());
    if (t.contains("max_logit_diff_over_max_abs"))
      std::printf(", max |logit diff| / max |logit| %.2e", t["max_logit_diff_over_max_abs"].get<double>());
    std::printf("\n");
  }
  if (report.contains("verdict")) {
    const auto& v = report["verdict"];
    std::printf("verdict (%s): %s; top-1 %s (floor %.4f), ppl %s (limit %.2f%%)\n",
                v["basis"].get<std::string>().c_str(), v["pass"].get<bool>() ? "PASS" : "FAIL",
                v["top1_pass"].get<bool>() ? "ok" : "below", v["top1_floor"].get<double>(),
                v["ppl_pass"].get<bool>() ? "ok" : "outside", 100 * v["ppl_limit"].get<double>());
  }
  for (const auto& row : report["greedy"]["rows"]) {
    if (row["identical"].get<bool>()) {
      std::printf("greedy %3zu tokens identical   | %s\n", row["tokens"].get<size_t>(),
                  row["prompt"].get<std::string>().c_str());
    } else {
      std::printf("greedy diverges at token %3lld (reference top-2 margin %.4f) | %s\n",
                  static_cast<long long>(row["first_divergence"].get<int64_t>()),
                  row["reference_top2_margin_there"].get<float>(), row["prompt"].get<std::string>().c_str());
    }
  }
}

int run_compare(const CompareArgs& a) {
  if (a.seqlen < 2) fail(ErrorCode::kInvalidArgument, "--seqlen must be at least 2, not {}", a.seqlen);
  if (a.devices.empty() && a.save_reference.empty()) fail(ErrorCode::kInvalidArgument, "no --device to compare");
  check_device_name(a.reference);
  for (const std::string& d : a.devices) check_device_name(d);
  for (const std::string& d : a.controls) check_device_name(d);
  if (!a.controls.empty() && a.text.empty())
    fail(ErrorCode::kInvalidArgument, "--control needs --text: the verdict compares teacher-forced figures");
  if (!a.save_reference.empty() && !a.load_reference.empty())
    fail(ErrorCode::kInvalidArgument, "--save-reference and --load-reference exclude each other");
  if (!a.load_reference.empty() && !a.controls.empty())
    fail(ErrorCode::kInvalidArgument, "--control with --load-reference: the controls come from the reference file");
  const std::string path = resolve_model_path(a.model);
  auto ckpt = open_checkpoint(path);
  const auto prompts = read_prompts(a.prompts);

  // What the reference runs depend on: a loaded file must have been made for the same.
  const nlohmann::json key = {{"model", content_fingerprint(path)},
                              {"reference", a.reference},
                              {"text", a.text.empty() ? std::string() : content_fingerprint(a.text)},
                              {"seqlen", a.seqlen},
                              {"max_windows", a.max_windows},
                              {"prompts", prompts},
                              {"max_new_tokens", a.max_new_tokens}};
  ReferenceRuns rr;
  if (!a.load_reference.empty()) {
    rr = load_reference(a.load_reference, key);
  } else {
    // The reference once: teacher-forced logits of every window, greedy continuations.
    LlamaModelOptions ro;
    ro.page_size = 16;
    ro.device = a.reference;
    auto ref = LlamaModel::load(*ckpt, ro);
    if (!a.text.empty()) {
      const std::vector<int32_t> ids = tokenize_text(path, read_text_file(a.text), /*add_special=*/true);
      int64_t windows = static_cast<int64_t>(ids.size()) / a.seqlen;
      if (a.max_windows > 0) windows = std::min(windows, a.max_windows);
      if (windows == 0) fail(ErrorCode::kInvalidArgument, "{}: fewer tokens than one window of {}", a.text, a.seqlen);
      for (int64_t w = 0; w < windows; ++w) {
        rr.windows.emplace_back(ids.begin() + w * a.seqlen, ids.begin() + (w + 1) * a.seqlen);
        Batch b;
        b.seqs.push_back({w, rr.windows.back(), 0});
        b.all_logits = true;
        rr.logits.emplace_back();
        ref->forward(b, rr.logits.back());
        ref->release(w);
        rr.top1.emplace_back();
        rr.nll.emplace_back();
        for (int64_t t = 0; t < a.seqlen; ++t) {
          const auto r = rr.logits.back().all_row(t);
          rr.top1.back().push_back(argmax(r));
          if (t + 1 < a.seqlen) rr.nll.back().push_back(token_nll(r, rr.windows.back()[t + 1]));
        }
      }
    }
    for (size_t p = 0; p < prompts.size(); ++p) {
      rr.prompt_ids.push_back(tokenize_text(path, prompts[p], /*add_special=*/true));
      rr.margins.emplace_back();
      rr.greedy.push_back(greedy(*ref, 1000000 + p, rr.prompt_ids.back(), a.max_new_tokens, &rr.margins.back()));
    }
  }

  auto emit = [&](const nlohmann::json& report) {
    if (a.json) {
      std::printf("%s\n", report.dump().c_str());
    } else {
      print_report(report);
    }
    std::fflush(stdout);
  };
  auto figures = [](const nlohmann::json& report) {
    AgreementFigures f;
    f.device = report["device"].get<std::string>();
    if (report.contains("teacher_forced")) {
      const auto& t = report["teacher_forced"];
      f.positions = t["positions"].get<int64_t>();
      f.top1 = t["top1_agreement"].get<double>();
      f.ppl_rel_diff = t["ppl_rel_diff"].get<double>();
    }
    return f;
  };
  // Controls first: the devices' verdicts need their spread.
  std::vector<AgreementFigures> controls;
  for (const std::string& control : a.controls) {
    nlohmann::json report = compare_one(path, *ckpt, a, control, rr, prompts);
    report["role"] = "control";
    rr.controls.push_back(report);
  }
  for (const nlohmann::json& report : rr.controls) {  // run here, or loaded with the reference
    controls.push_back(figures(report));
    emit(report);
  }
  if (!a.save_reference.empty()) save_reference(a.save_reference, key, rr);
  bool all_pass = true;
  for (const std::string& device : a.devices) {
    nlohmann::json report = compare_one(path, *ckpt, a, device, rr, prompts);
    if (report.contains("teacher_forced")) {
      const CompareVerdict v = judge_agreement(figures(report), controls);
      report["verdict"] = {{"pass", v.pass},          {"basis", v.basis},         {"top1_pass", v.top1_pass},
                           {"top1_floor", v.top1_floor}, {"ppl_pass", v.ppl_pass}, {"ppl_limit", v.ppl_limit}};
      all_pass = all_pass && v.pass;
    }
    emit(report);
  }
  if (a.strict && !all_pass) return 1;
  return 0;
}

}  // namespace

void add_eval_compare_command(CLI::App& app) {
  CLI::App* eval = app.get_subcommand("eval");  // made by add_eval_command
  auto* sub = eval->add_subcommand("compare", "One checkpoint on a device vs the CPU reference: top-1 agreement, "
                                              "perplexity, greedy divergence");
  auto a = std::make_shared<CompareArgs>();
  sub->add_option("--model", a->model, "Model: Hugging Face directory (quantized or not) or .gguf")->envname("QSERVE_MODEL");
  CLI::Option* device = sub->add_option("--device", a->devices,
                                        "Device under test (cpu | cpu-fp16 | cpu-fp16:POINTS | cuda); repeated: each "
                                        "against the same reference run, one report each (none by default with "
                                        "--save-reference)")
                            ->capture_default_str();
  sub->add_option("--control", a->controls,
                  "Control run (repeatable): the reference perturbed, e.g. cpu-fp16 or cpu-fp16:all,mantissa=22; the "
                  "verdict then allows the spread the controls show instead of the fixed 99% / 0.5%");
  sub->add_flag("--strict", a->strict, "Exit with status 1 when a device's verdict fails");
  sub->add_option("--save-reference", a->save_reference,
                  "Write the reference runs and the controls' reports to this file (for --load-reference)");
  sub->add_option("--load-reference", a->load_reference,
                  "Take the reference runs and the controls from this file instead of running them (same checkpoint, "
                  "text, reference, window and prompt settings)");
  sub->add_option("--reference", a->reference, "Reference device (cpu: FP32 activations; cpu-fp16: the contract's FP16 activations, as the GPU stores them)")->capture_default_str();
  sub->add_option("--text", a->text, "Text for teacher forcing (skipped when absent)");
  sub->add_option("--seqlen", a->seqlen, "Tokens per teacher-forced window")->capture_default_str();
  sub->add_option("--max-windows", a->max_windows, "Teacher-forced windows (0: all)")->capture_default_str();
  sub->add_option("--prompts", a->prompts, "File with one prompt per line (default: four built-in prompts)");
  sub->add_option("--max-new-tokens", a->max_new_tokens, "Greedy tokens per prompt")->capture_default_str();
  sub->add_flag("--json", a->json, "One JSON line per device (and per control)");
  set_command_body(sub, [a, device]() -> int {
    // Saving a reference (on the CPU machine) needs no device under test unless one is named.
    if (!a->save_reference.empty() && device->count() == 0) a->devices.clear();
    return run_compare(*a);
  });
}

}  // namespace qserve::cli
