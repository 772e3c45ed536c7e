#include "quant/gptq_block.h"

#include <algorithm>

#include "core/error.h"
#include "quant/f32_matmul.h"
#include "quant/gptq.h"
#include "quant/weight_clip.h"

namespace qserve::quant {
namespace {

Matrix every_nth_row(const Matrix& x, int64_t every) {
  Matrix out(0, x.cols);
  for (int64_t r = 0; r < x.rows; r += every) {
    out.data.insert(out.data.end(), x.row(r), x.row(r) + x.cols);
    ++out.rows;
  }
  return out;
}

// Per output row, the squared output error of q against w on the rows of x: [n].
std::vector<double> row_errors(const Matrix& x, const Matrix& w, const QuantizedLinear& q) {
  const std::vector<float> deq = dequantize_linear(q);
  std::vector<float> diff(w.data.size()), y(static_cast<size_t>(x.rows * w.rows));
  for (size_t i = 0; i < diff.size(); ++i) diff[i] = w.data[i] - deq[i];
  matmul_nt(x.data.data(), x.rows, x.cols, diff.data(), w.rows, y.data());
  std::vector<double> e(static_cast<size_t>(w.rows), 0.0);
  for (int64_t t = 0; t < x.rows; ++t)
    for (int64_t o = 0; o < w.rows; ++o) e[o] += static_cast<double>(y[t * w.rows + o]) * y[t * w.rows + o];
  return e;
}

// Row o of a g128 layer (codes, level-1 scale, level-2 scales and zeros) from src.
void copy_g128_row(QuantizedLinear& dst, const QuantizedLinear& src, int64_t o) {
  const int64_t kb = dst.k / 2, groups = dst.g128.groups();
  std::copy_n(src.g128.qweight.begin() + o * kb, kb, dst.g128.qweight.begin() + o * kb);
  dst.g128.s1[o] = src.g128.s1[o];
  std::copy_n(src.g128.s2.begin() + o * groups, groups, dst.g128.s2.begin() + o * groups);
  std::copy_n(src.g128.zero.begin() + o * groups, groups, dst.g128.zero.begin() + o * groups);
}

}  // namespace

std::vector<QuantizedLinear> quantize_block_staged(const LlamaShape& s, const BlockWeights& w,
                                                   const BlockWeights& targets, const BlockTaps& taps,
                                                   const std::vector<float>& h_in, int64_t n_seq, int64_t seqlen,
                                                   const BlockTaps* fp_taps, const QuantizeOptions& opt,
                                                   LayerReport* report) {
  const WeightFormat fmt = weight_format_for(opt.precision, opt.group);
  QS_CHECK(fmt != WeightFormat::kF16) << "GPTQ needs a quantized weight format";
  const Matrix* grid[7] = {&w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down};
  const Matrix* target[7] = {&targets.q, &targets.k, &targets.v, &targets.o, &targets.gate, &targets.up, &targets.down};
  // The block as computed so far: quantized linears dequantized, the others FP.
  BlockWeights cur = targets;
  Matrix* cur_m[7] = {&cur.q, &cur.k, &cur.v, &cur.o, &cur.gate, &cur.up, &cur.down};
  struct Stage {
    int first, last;  // linears [first, last) share this input
    Matrix BlockTaps::*input;
    BlockStop stop;   // where the forward that measures it may stop
  };
  static constexpr Stage kStages[4] = {{0, 3, &BlockTaps::attn_in, BlockStop::kEnd},
                                       {3, 4, &BlockTaps::o_in, BlockStop::kAfterOIn},
                                       {4, 6, &BlockTaps::mlp_in, BlockStop::kAfterMlpIn},
                                       {6, 7, &BlockTaps::down_in, BlockStop::kAfterDownIn}};
  const GptqOptions gopt{.damp = opt.gptq_damp, .act_order = opt.gptq_act_order, .row_cap = opt.gptq_row_cap};
  std::vector<QuantizedLinear> out;
  double ratio_sum = 0;
  for (int st = 0; st < 4; ++st) {
    const Stage& stage = kStages[st];
    const Matrix* x = &(taps.*stage.input);
    Matrix measured;
    if (opt.gptq_sequential && st > 0) {
      QS_CHECK(static_cast<int64_t>(h_in.size()) == n_seq * seqlen * s.hidden) << "GPTQ stages need the block input";
      BlockTaps t;
      t.keep_every = taps.keep_every;
      std::vector<float> h = h_in;
      block_forward(s, cur, h.data(), n_seq, seqlen, &t, {}, stage.stop);
      measured = std::move(t.*stage.input);
      x = &measured;
    }
    QS_CHECK(x->rows > 0) << "GPTQ needs calibration rows";
    const GptqFactor f = gptq_factor(*x, gopt);
    std::vector<float> shift;
    if (fp_taps) {
      const Matrix& xr = fp_taps->*stage.input;
      QS_CHECK(xr.rows == x->rows && xr.cols == x->cols) << "FP and quantized calibration rows differ";
      shift = gptq_ls_shift(*x, xr, f);
    }
    // Up to about 2,048 evenly spaced rows: for the reported error and the clip search.
    const Matrix probe = every_nth_row(*x, std::max<int64_t>(1, x->rows / 2048));
    for (int i = stage.first; i < stage.last; ++i) {
      out.push_back(quantize_linear(fmt, *grid[i], opt.group));
      Matrix shifted;
      const Matrix* tgt = target[i];
      if (fp_taps) {
        shifted = gptq_apply_shift(*target[i], shift);
        tgt = &shifted;
      }
      const double rtn = layer_output_error(probe, *tgt, out.back());
      gptq_requantize(out.back(), *tgt, f);
      if (opt.gptq_clip_search && fmt == WeightFormat::kW4G128) {
        // GPTQ-aware clipping: GPTQ again on grids of uniformly clipped targets; per output row
        // (rows are independent in GPTQ), the grid whose GPTQ result has the least output error.
        std::vector<double> best = row_errors(probe, *tgt, out.back());
        for (float r : opt.gptq_clip_ratios) {
          Matrix g = *tgt;
          clip_to_ratio(fmt, opt.group, g, r);
          QuantizedLinear cand = quantize_linear(fmt, g, opt.group);
          gptq_requantize(cand, *tgt, f);
          const std::vector<double> e = row_errors(probe, *tgt, cand);
          for (int64_t o = 0; o < cand.n; ++o)
            if (e[o] < best[o]) {
              best[o] = e[o];
              copy_g128_row(out.back(), cand, o);
            }
        }
      }
      const double err = layer_output_error(probe, *tgt, out.back());
      ratio_sum += rtn > 0 ? err / rtn : 1.0;
      if (opt.gptq_sequential) cur_m[i]->data = dequantize_linear(out.back());
    }
  }
  if (report) report->gptq_error_ratio = ratio_sum / 7;
  return out;
}

}  // namespace qserve::quant
