// x86 features that __builtin_cpu_supports does not name on every compiler
// the project builds with (clang before 16 rejects "avxvnni" and "f16c"),
// asked of CPUID directly. False on other architectures.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace qserve::cpu_features {

// AVX-VNNI (VEX-encoded vpdpbusd): CPUID leaf 7, sub-leaf 1, EAX bit 4.
inline bool avx_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 4) & 1u);
#else
  return false;
#endif
}

// F16C (vcvtph2ps / vcvtps2ph): CPUID leaf 1, ECX bit 29.
inline bool f16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && ((c >> 29) & 1u);
#else
  return false;
#endif
}

}  // namespace qserve::cpu_features
