// libFuzzer target: a safetensors file (a corrupt or hostile header must end
// in qserve::Error, never a crash or another exception); every tensor it
// accepts lies inside the file and has the bytes its dtype and shape need.
//   scripts/fuzz.sh [seconds]      (seed: tests/data/gguf/tiny_llama_hf.safetensors)
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_util.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qserve::fuzz::MemFile file(data, size);
  try {
    auto st = qserve::SafetensorsFile::open(file.path());
    FUZZ_CHECK(st->metadata().is_object());
    for (const auto& name : st->names()) {
      const qserve::Tensor& t = st->get(name);
      FUZZ_CHECK(t.numel() >= 0);
      FUZZ_CHECK(t.nbytes() <= size);
      // every byte readable (ASan: inside the mapping)
      const auto* p = static_cast<const uint8_t*>(t.data());
      unsigned sum = 0;
      for (size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
      (void)sum;
    }
  } catch (const qserve::Error&) {
  }
  return 0;
}
