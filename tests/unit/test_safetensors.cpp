// Safetensors reader / writer: round trips, and malformed files made here
// (each must give a clear Error naming the file, never a crash).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/half.h"
#include "model/safetensors.h"
#include "test_files.h"

namespace qserve {
namespace {

using testing_files::append_le;
using testing_files::expect_error;
using testing_files::TempDir;
using testing_files::write_bytes;

// [u64 N][header padded to N][data]
std::string make_file(const std::string& header, const std::string& data) {
  std::string out;
  append_le<uint64_t>(&out, header.size());
  return out + header + data;
}

Tensor iota(DType dtype, std::vector<int64_t> shape) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  auto* bytes = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  return t;
}

TEST(Safetensors, WriterRoundTripsEveryDtype) {
  TempDir dir;
  SafetensorsWriter w;
  std::vector<std::pair<std::string, Tensor>> ts = {
      {"f32", iota(DType::kF32, {3, 5})},  {"f16", iota(DType::kF16, {7})},  {"bf16", iota(DType::kBF16, {2, 3, 1})},
      {"i8", iota(DType::kI8, {5})},        {"u8", iota(DType::kU8, {3})},    {"i32", iota(DType::kI32, {1, 3})},
      {"i64", iota(DType::kI64, {2})},      {"empty", iota(DType::kF32, {0, 4})}, {"scalar", iota(DType::kF32, {})},
  };
  for (auto& [n, t] : ts) w.add(n, t);
  w.set_metadata("format", "pt");
  const std::string path = dir.file("a.safetensors");
  w.write(path);
  auto st = SafetensorsFile::open(path);
  EXPECT_EQ(st->metadata().at("format"), "pt");
  ASSERT_EQ(st->names().size(), ts.size());
  for (auto& [n, t] : ts) {
    const Tensor& r = st->get(n);
    EXPECT_EQ(r.dtype(), t.dtype()) << n;
    EXPECT_EQ(r.shape(), t.shape()) << n;
    ASSERT_EQ(r.nbytes(), t.nbytes()) << n;
    if (t.nbytes()) { EXPECT_EQ(std::memcmp(r.data(), t.data(), t.nbytes()), 0) << n; }
    if (t.nbytes()) { EXPECT_EQ(reinterpret_cast<uintptr_t>(r.data()) % dtype_size(t.dtype()), 0u) << n; }
  }
  // Zero-copy: the views outlive the file object through the mapping.
  Tensor kept = st->get("f32");
  st.reset();
  EXPECT_EQ(std::memcmp(kept.data(), ts[0].second.data(), kept.nbytes()), 0);
  expect_error([&] { SafetensorsFile::open(path)->get("nope"); }, ErrorCode::kNotFound, {"nope", path});
}

TEST(Safetensors, WriterIsAtomicAndRejectsDuplicates) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("x", iota(DType::kF32, {2}));
  expect_error([&] { w.add("x", iota(DType::kF32, {2})); }, ErrorCode::kInvalidArgument, {"duplicate", "x"});
  // GGUF's block formats are no safetensors dtype: refused by name, both ways
  expect_error([&] { w.add("q", Tensor::zeros(DType::kQ4_0, {2, 32})); }, ErrorCode::kInvalidArgument, {"'q'", "Q4_0"});
  const std::string bad = dir.file("missing_dir/out.safetensors");
  expect_error([&] { w.write(bad); }, ErrorCode::kIo, {"missing_dir"});
  EXPECT_FALSE(std::filesystem::exists(bad));
  // Overwrite replaces the file whole; no temporary file is left behind.
  const std::string path = dir.file("out.safetensors");
  write_bytes(path, "old contents");
  w.write(path);
  EXPECT_EQ(SafetensorsFile::open(path)->names(), std::vector<std::string>{"x"});
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(Safetensors, MisalignedHeaderStillReadsTyped) {
  TempDir dir;
  // Header of odd length: F32 data starts misaligned; the reader copies it.
  float v[2] = {1.5f, -2.0f};
  std::string data(reinterpret_cast<const char*>(v), sizeof(v));
  const std::string path = dir.file("m.safetensors");
  write_bytes(path, make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} )", data));
  auto st = SafetensorsFile::open(path);
  const Tensor& t = st->get("w");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 4, 0u);
  EXPECT_EQ(t.data_as<float>()[0], 1.5f);
  EXPECT_EQ(t.data_as<float>()[1], -2.0f);
}

struct BadCase {
  const char* label;
  std::string bytes;
  std::vector<std::string> needles;
};

TEST(Safetensors, MalformedFilesGiveClearErrors) {
  const std::string d16(16, '\0');
  const auto hdr = [](const std::string& entries) { return "{" + entries + "}"; };
  std::vector<BadCase> cases = {
      {"empty file", "", {"at least 8"}},
      {"short length", std::string("\x10\x00\x00", 3), {"at least 8"}},
      {"header length past end", make_file("{}", "").substr(0, 8) + "{", {"header length"}},
      {"huge header length", std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}", {"header length"}},
      {"invalid json", make_file(R"({"a": {"dtype": )", d16), {"not valid JSON"}},
      {"not an object", make_file("[1,2,3]", d16), {"not a JSON object"}},
      {"entry not object", make_file(hdr(R"("a": 3)"), d16), {"'a'", "not an object"}},
      {"unknown dtype", make_file(hdr(R"("a":{"dtype":"F8","shape":[4],"data_offsets":[0,4]})"), d16),
       {"'a'", "unknown dtype 'F8'"}},
      {"block dtype", make_file(hdr(R"("a":{"dtype":"Q8_0","shape":[32],"data_offsets":[0,34]})"), std::string(34, '\0')),
       {"'a'", "unknown dtype 'Q8_0'"}},
      {"missing dtype", make_file(hdr(R"("a":{"shape":[4],"data_offsets":[0,4]})"), d16), {"'a'", "dtype"}},
      {"missing shape", make_file(hdr(R"("a":{"dtype":"F32","data_offsets":[0,4]})"), d16), {"'a'", "shape"}},
      {"negative dim", make_file(hdr(R"("a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), d16),
       {"'a'", "non-negative"}},
      {"float dim", make_file(hdr(R"("a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"), d16),
       {"'a'", "non-negative"}},
      {"overflowing shape",
       make_file(hdr(R"("a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,16]})"), d16),
       {"'a'", "overflows"}},
      {"overflowing bytes",
       make_file(hdr(R"("a":{"dtype":"I64","shape":[4611686018427387904],"data_offsets":[0,16]})"), d16),
       {"'a'", "overflows"}},
      {"huge dim", make_file(hdr(R"("a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,16]})"), d16),
       {"'a'", "non-negative"}},
      {"offsets past end", make_file(hdr(R"("a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]})"), d16),
       {"'a'", "past the end"}},
      {"offset huge", make_file(hdr(R"("a":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]})"), d16),
       {"'a'", "reversed"}},
      {"reversed offsets", make_file(hdr(R"("a":{"dtype":"U8","shape":[0],"data_offsets":[8,4]})"), d16),
       {"'a'", "reversed"}},
      {"bad offsets", make_file(hdr(R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0]})"), d16),
       {"'a'", "data_offsets"}},
      {"size mismatch", make_file(hdr(R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]})"), d16),
       {"'a'", "needs 12 bytes"}},
      {"overlap",
       make_file(hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]})"),
                 d16),
       {"'a'", "'b'", "overlap"}},
      {"same bytes twice",
       make_file(hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]})"),
                 d16),
       {"overlap"}},
      {"metadata not strings", make_file(hdr(R"("__metadata__":{"k":1})"), d16), {"__metadata__"}},
  };
  TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string path = dir.file("bad.safetensors");
    write_bytes(path, c.bytes);
    std::vector<std::string> needles = c.needles;
    needles.push_back(path);
    try {
      SafetensorsFile::open(path);
      ADD_FAILURE() << c.label << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCorruptData) << e.what();
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }
}

TEST(Safetensors, EveryTruncationIsAnError) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("a", iota(DType::kF16, {3, 3}));
  w.add("b", iota(DType::kF32, {5}));
  const std::string good = dir.file("good.safetensors");
  w.write(good);
  const std::string bytes = testing_files::read_bytes(good);
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string path = dir.file("t.safetensors");
    write_bytes(path, bytes.substr(0, n));
    expect_error([&] { SafetensorsFile::open(path); }, ErrorCode::kCorruptData, {path});
  }
}

TEST(Safetensors, MissingFileIsNotFound) {
  TempDir dir;
  expect_error([&] { SafetensorsFile::open(dir.file("none.safetensors")); }, ErrorCode::kNotFound, {"none.safetensors"});
}

}  // namespace
}  // namespace qserve
