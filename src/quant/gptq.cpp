#include "quant/gptq.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "quant/f32_matmul.h"

namespace qserve::quant {
namespace {

// In-place lower Cholesky factor of a [k, k] row-major SPD matrix (lower
// triangle read and written). False when a pivot is not positive.
bool cholesky_lower(std::vector<double>& a, int64_t k) {
  for (int64_t j = 0; j < k; ++j) {
    double* rj = &a[static_cast<size_t>(j * k)];
    double d = rj[j];
    for (int64_t m = 0; m < j; ++m) d -= rj[m] * rj[m];
    if (!(d > 0)) return false;
    const double ljj = std::sqrt(d);
    rj[j] = ljj;
    ThreadPool::global().parallel_for(k - j - 1, [&](int64_t b, int64_t e) {
      for (int64_t i = j + 1 + b; i < j + 1 + e; ++i) {
        double* ri = &a[static_cast<size_t>(i * k)];
        double s = ri[j];
        for (int64_t m = 0; m < j; ++m) s -= ri[m] * rj[m];
        ri[j] = s / ljj;
      }
    }, 64);
  }
  return true;
}

// Reverses the order of rows and columns (J A J, J the exchange matrix).
std::vector<double> flip(const std::vector<double>& a, int64_t k) {
  std::vector<double> out(a.size());
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) out[static_cast<size_t>(i * k + j)] = a[static_cast<size_t>((k - 1 - i) * k + (k - 1 - j))];
  return out;
}

struct Code {
  int code;
  float deq;
};

inline int clamp_round(double v, int lo, int hi) {
  return static_cast<int>(std::clamp(std::nearbyint(v), static_cast<double>(lo), static_cast<double>(hi)));
}

}  // namespace

GptqFactor gptq_factor(const Matrix& x, const GptqOptions& opt) {
  QS_CHECK(x.rows > 0 && x.cols > 0) << "GPTQ needs calibration inputs";
  const int64_t k = x.cols, t = x.rows;
  // H = X^T X / t: transpose once, then the FP32 matmul (AVX2 when present).
  std::vector<float> row_scale(static_cast<size_t>(t), 1.0f);
  if (opt.row_cap > 0) {
    std::vector<double> n2(static_cast<size_t>(t));
    for (int64_t r = 0; r < t; ++r) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += static_cast<double>(x.at(r, i)) * x.at(r, i);
      n2[r] = s;
    }
    std::vector<double> sorted = n2;
    std::nth_element(sorted.begin(), sorted.begin() + t / 2, sorted.end());
    const double bound = opt.row_cap * sorted[t / 2];
    for (int64_t r = 0; r < t; ++r)
      if (n2[r] > bound && bound > 0) row_scale[r] = static_cast<float>(std::sqrt(bound / n2[r]));
  }
  std::vector<float> xt(static_cast<size_t>(k * t)), hf(static_cast<size_t>(k * k));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t i = 0; i < k; ++i) xt[static_cast<size_t>(i * t + r)] = x.at(r, i) * row_scale[r];
  matmul_nt(xt.data(), k, t, xt.data(), k, hf.data());
  std::vector<double> h(hf.size());
  double mean_diag = 0;
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) {
      // Symmetrize (the matmul's summation order may differ between (i, j) and (j, i)).
      const double v = 0.5 * (static_cast<double>(hf[i * k + j]) + hf[j * k + i]) / static_cast<double>(t);
      h[static_cast<size_t>(i * k + j)] = v;
    }
  for (int64_t i = 0; i < k; ++i) {
    double& d = h[static_cast<size_t>(i * k + i)];
    if (!(d > 0)) d = 1;
    mean_diag += d;
  }
  mean_diag /= static_cast<double>(k);
  std::vector<int64_t> perm(k);
  for (int64_t i = 0; i < k; ++i) perm[i] = i;
  if (opt.act_order)
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return h[a * k + a] > h[b * k + b]; });
  {
    std::vector<double> hp(h.size());
    for (int64_t a = 0; a < k; ++a)
      for (int64_t b = 0; b < k; ++b) hp[static_cast<size_t>(a * k + b)] = h[static_cast<size_t>(perm[a] * k + perm[b])];
    h.swap(hp);
  }

  // Upper R with H = R R^T: the lower Cholesky factor L' of J H J gives R = J L' J.
  // Then H^-1 = R^-T R^-1, i.e. U = R^-1 (upper, positive diagonal).
  GptqFactor f;
  f.k = k;
  f.perm = perm;
  std::vector<double> l;
  for (double damp = opt.damp;; damp *= 10) {
    std::vector<double> hd = h;
    for (int64_t i = 0; i < k; ++i) hd[static_cast<size_t>(i * k + i)] += damp * mean_diag;
    l = flip(hd, k);
    if (cholesky_lower(l, k)) {
      f.damp_used = damp;
      break;
    }
    QS_CHECK(damp < 1e6) << "GPTQ: H is not positive definite even with damping " << damp;
  }
  // R[i, j] = L'[k-1-i, k-1-j] for j >= i.
  auto r_at = [&](int64_t i, int64_t j) { return l[static_cast<size_t>((k - 1 - i) * k + (k - 1 - j))]; };
  std::vector<double> rrow(static_cast<size_t>(k * k), 0.0);  // R row-major, upper part
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = i; j < k; ++j) rrow[static_cast<size_t>(i * k + j)] = r_at(i, j);
  // U = R^-1, column by column: R u_j = e_j, back substitution (u_j[i] = 0 for i > j).
  f.u.assign(static_cast<size_t>(k * k), 0.0f);
  ThreadPool::global().parallel_for(k, [&](int64_t b, int64_t e) {
    std::vector<double> col(k);
    for (int64_t j = b; j < e; ++j) {
      for (int64_t i = j; i >= 0; --i) {
        const double* ri = &rrow[static_cast<size_t>(i * k)];
        double s = i == j ? 1.0 : 0.0;
        for (int64_t m = i + 1; m <= j; ++m) s -= ri[m] * col[m];
        col[i] = s / ri[i];
      }
      for (int64_t i = 0; i <= j; ++i) f.u[static_cast<size_t>(i * k + j)] = static_cast<float>(col[i]);
    }
  });
  return f;
}

void gptq_requantize(QuantizedLinear& q, const Matrix& w, const GptqFactor& f) {
  if (q.format == WeightFormat::kF16) return;
  QS_CHECK(w.rows == q.n && w.cols == q.k) << "GPTQ: weights " << w.rows << "x" << w.cols << " vs layer " << q.n << "x" << q.k;
  QS_CHECK(f.k == q.k) << "GPTQ: factor for " << f.k << " inputs, layer has " << q.k;
  const int64_t n = q.n, k = q.k;
  const bool w4 = q.format != WeightFormat::kW8PerChannel;
  // Codes of the round-to-nearest quantization, [n, k] (W4: 0..15, W8: -127..127).
  std::vector<int> codes(static_cast<size_t>(n * k));
  const uint8_t* packed = q.format == WeightFormat::kW4G128        ? q.g128.qweight.data()
                          : q.format == WeightFormat::kW4PerChannel ? q.w4pc.qweight.data()
                          : q.format == WeightFormat::kW4A16        ? q.w4a16.qweight.data()
                                                                    : nullptr;
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < k; ++i)
      codes[o * k + i] = w4 ? int4_at(packed, k, o, i) : q.w8.q[o * k + i];
  const int64_t group = q.format == WeightFormat::kW4G128 ? q.g128.group : q.format == WeightFormat::kW4A16 ? q.w4a16.group : k;
  const int64_t groups = num_groups(k, group);

  ThreadPool::global().parallel_for(n, [&](int64_t b, int64_t e) {
    std::vector<float> row(k);  // the row's weights in processing order
    std::vector<int> lo(groups), hi(groups);
    for (int64_t o = b; o < e; ++o) {
      for (int64_t p = 0; p < k; ++p) row[p] = w.at(o, f.perm[p]);
      int* c = &codes[o * k];
      for (int64_t g = 0; g < groups; ++g) {  // the codes round to nearest used in each group
        const auto [mn, mx] = std::minmax_element(c + g * group, c + std::min(k, (g + 1) * group));
        lo[g] = *mn;
        hi[g] = *mx;
      }
      for (int64_t p = 0; p < k; ++p) {
        const int64_t i = f.perm[p], g = i / group;  // column i, at step p
        Code qc{c[i], 0.0f};
        // The same arithmetic as the round-to-nearest quantizers of weight_format.cpp (float
        // division, then round half to even), so that without error feedback the codes are theirs.
        switch (q.format) {
          case WeightFormat::kW4G128: {
            const float s1 = half_to_float(q.g128.s1[o]);
            const int s2 = q.g128.s2[o * groups + g], z = q.g128.zero[o * groups + g];
            if (s1 > 0) {
              const int w8 = clamp_round(row[p] / s1, -kProtectiveRange, kProtectiveRange);
              qc.code = std::clamp(clamp_round(static_cast<double>(w8) / s2, -255, 255) + z, lo[g], hi[g]);
            }
            qc.deq = s1 * static_cast<float>((qc.code - z) * s2);  // as dequantize(W4G128Weights)
            break;
          }
          case WeightFormat::kW4PerChannel: {
            const float s = half_to_float(q.w4pc.scale[o]);
            const int z = q.w4pc.zero[o];
            if (s > 0) qc.code = std::clamp(clamp_round(row[p] / s, -255, 255) + z, 0, 15);
            qc.deq = s * static_cast<float>(qc.code - z);
            break;
          }
          case WeightFormat::kW4A16: {
            const float s = half_to_float(q.w4a16.scale[o * groups + g]);
            const int z = q.w4a16.zero[o * groups + g];
            if (s > 0) qc.code = std::clamp(clamp_round(row[p] / s, -255, 255) + z, 0, 15);
            qc.deq = s * static_cast<float>(qc.code - z);
            break;
          }
          case WeightFormat::kW8PerChannel: {
            const float s = half_to_float(q.w8.scale[o]);
            if (s > 0) qc.code = clamp_round(row[p] / s, -127, 127);
            qc.deq = s * static_cast<float>(qc.code);
            break;
          }
          case WeightFormat::kF16: break;
        }
        c[i] = qc.code;
        const float* up = &f.u[static_cast<size_t>(p * k)];
        const float err = (row[p] - qc.deq) / up[p];
        for (int64_t j = p + 1; j < k; ++j) row[j] -= err * up[j];
      }
    }
  });

  if (w4) {
    std::vector<uint8_t> vals(codes.begin(), codes.end());
    std::vector<uint8_t> p = pack_int4(vals, n, k);
    if (q.format == WeightFormat::kW4G128) q.g128.qweight = std::move(p);
    else if (q.format == WeightFormat::kW4PerChannel) q.w4pc.qweight = std::move(p);
    else q.w4a16.qweight = std::move(p);
  } else {
    for (size_t i = 0; i < codes.size(); ++i) q.w8.q[i] = static_cast<int8_t>(codes[i]);
  }
}

QuantizedLinear gptq_quantize_linear(WeightFormat format, const Matrix& w, const Matrix& grid_weights, int64_t group,
                                     const GptqFactor& f) {
  QuantizedLinear q = quantize_linear(format, grid_weights, group);
  gptq_requantize(q, w, f);
  return q;
}

std::vector<float> gptq_ls_shift(const Matrix& x_q, const Matrix& x_ref, const GptqFactor& f) {
  const int64_t k = x_q.cols, t = x_q.rows;
  QS_CHECK(x_ref.cols == k && x_ref.rows == t && f.k == k && t > 0)
      << "GPTQ target: inputs " << x_q.rows << "x" << x_q.cols << " and " << x_ref.rows << "x" << x_ref.cols
      << ", factor for " << f.k;
  // G^T = (x_ref - x_q)^T x_q / t  [k, k]
  std::vector<float> xt(static_cast<size_t>(k * t)), dt(static_cast<size_t>(k * t)), gt(static_cast<size_t>(k * k));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t i = 0; i < k; ++i) {
      xt[static_cast<size_t>(i * t + r)] = x_q.at(r, i);
      dt[static_cast<size_t>(i * t + r)] = x_ref.at(r, i) - x_q.at(r, i);
    }
  matmul_nt(dt.data(), k, t, xt.data(), k, gt.data());
  for (float& v : gt) v /= static_cast<float>(t);
  // Hd^-1 in the original column order: Hp^-1 = U^T U with Hp[a, b] = Hd[perm[a], perm[b]].
  std::vector<float> ut(static_cast<size_t>(k * k)), hpi(static_cast<size_t>(k * k)), hinv(static_cast<size_t>(k * k));
  for (int64_t a = 0; a < k; ++a)
    for (int64_t m = 0; m < k; ++m) ut[static_cast<size_t>(a * k + m)] = f.u[static_cast<size_t>(m * k + a)];
  matmul_nt(ut.data(), k, k, ut.data(), k, hpi.data());
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b)
      hinv[static_cast<size_t>(f.perm[a] * k + f.perm[b])] = hpi[static_cast<size_t>(a * k + b)];
  // S^T = Hd^-1 G, as matmul_nt(Hd^-1, G^T).
  std::vector<float> st(static_cast<size_t>(k * k));
  matmul_nt(hinv.data(), k, k, gt.data(), k, st.data());
  return st;
}

Matrix gptq_apply_shift(const Matrix& w, const std::vector<float>& shift_t) {
  const int64_t n = w.rows, k = w.cols;
  QS_CHECK(static_cast<int64_t>(shift_t.size()) == k * k) << "GPTQ target: shift for another input size";
  std::vector<float> d(static_cast<size_t>(n * k));
  matmul_nt(w.data.data(), n, k, shift_t.data(), k, d.data());  // W S
  Matrix out = w;
  for (size_t i = 0; i < out.data.size(); ++i) out.data[i] += d[i];
  return out;
}

Matrix gptq_ls_target(const Matrix& w, const Matrix& x_q, const Matrix& x_ref, const GptqFactor& f) {
  QS_CHECK(w.cols == x_q.cols) << "GPTQ target: weights " << w.rows << "x" << w.cols << ", inputs of " << x_q.cols;
  return gptq_apply_shift(w, gptq_ls_shift(x_q, x_ref, f));
}

double layer_output_error(const Matrix& x, const Matrix& w, const QuantizedLinear& q) {
  QS_CHECK(x.cols == w.cols && w.rows == q.n && w.cols == q.k);
  const std::vector<float> deq = dequantize_linear(q);
  std::vector<float> diff(w.data.size());
  for (size_t i = 0; i < diff.size(); ++i) diff[i] = w.data[i] - deq[i];
  std::vector<float> y(static_cast<size_t>(x.rows * w.rows));
  matmul_nt(x.data.data(), x.rows, x.cols, diff.data(), w.rows, y.data());
  double s = 0;
  for (float v : y) s += static_cast<double>(v) * v;
  return s / static_cast<double>(x.rows);
}

}  // namespace qserve::quant
