// .npy reading and writing: every dtype round-trips, bad files fail with a message.
#include "TestUtil.h"

#include "rfuse/Runtime/Npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

using namespace rfuse;

namespace {

std::string tempPath(const std::string &name) {
  return std::string(::testing::TempDir()) + "/rfuse_npy_" + name;
}

class NpyRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(NpyRoundTrip, ValuesAndShapeSurvive) {
  DType dt = GetParam();
  std::mt19937_64 rng((int)dt + 1);
  HostTensor t = test::randomTensor(dt, {3, 1, 4}, rng);
  std::string path = tempPath(std::string(dtypeName(dt)) + ".npy");
  writeNpy(path, t);
  HostTensor back = readNpy(path);
  // bf16 has no NumPy dtype: it comes back as f32 with the same values.
  EXPECT_EQ(back.dtype, dt == DType::BF16 ? DType::F32 : dt);
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(back.f, t.f);
  EXPECT_EQ(back.i, t.i);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, NpyRoundTrip,
                         ::testing::Values(DType::F32, DType::F64, DType::F16, DType::BF16,
                                           DType::I1, DType::I32, DType::I64),
                         [](const auto &info) { return std::string(dtypeName(info.param)); });

TEST(Npy, ScalarAndVectorShapes) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{}, std::vector<int64_t>{5}}) {
    HostTensor t = HostTensor::fromDoubles(DType::F64, shape, std::vector<double>(shape.empty() ? 1 : 5, 2.5));
    std::string path = tempPath("shape.npy");
    writeNpy(path, t);
    HostTensor back = readNpy(path);
    EXPECT_EQ(back.shape, shape);
    EXPECT_EQ(back.f, t.f);
  }
}

TEST(Npy, RejectsBadFiles) {
  std::string path = tempPath("bad.npy");
  {
    std::ofstream out(path);
    out << "not numpy";
  }
  try {
    readNpy(path);
    FAIL() << "accepted a non-npy file";
  } catch (const NpyError &e) {
    EXPECT_NE(std::string(e.what()).find("bad magic"), std::string::npos);
  }
  // Truncated data.
  HostTensor t = HostTensor::fromDoubles(DType::F32, {100}, std::vector<double>(100, 1.5));
  writeNpy(path, t);
  std::string content;
  {
    std::ifstream in(path, std::ios::binary);
    content.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    std::ofstream out(path, std::ios::binary);
    out.write(content.data(), content.size() - 40);
  }
  EXPECT_THROW(readNpy(path), NpyError);
  EXPECT_THROW(readNpy(tempPath("does-not-exist.npy")), NpyError);
  std::remove(path.c_str());
}

} // namespace

namespace {
// A .npy image: magic, version 1.0, the header dict padded to 64 bytes, then `data`.
std::string npyImage(const std::string &dict, const std::string &data) {
  std::string header = dict;
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += (char)(header.size() & 0xff);
  out += (char)(header.size() >> 8);
  return out + header + data;
}
HostTensor readImage(const std::string &bytes) {
  std::istringstream in(bytes);
  return readNpy(in, bytes.size(), "image");
}
} // namespace

TEST(Npy, HostileSizesAreErrorsNotAllocations) {
  std::string eight(8, '\0');
  EXPECT_EQ(readImage(npyImage("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", eight)).f.size(), 1u);
  // A shape whose data the file does not hold, one that overflows 64 bits, a negative dim.
  for (const char *shape : {"(1000000000000,)", "(4294967296, 4294967296, 16)", "(-1,)", "(3, -2)"})
    EXPECT_THROW(readImage(npyImage(std::string("{'descr': '<f8', 'fortran_order': False, 'shape': ") +
                                    shape + ", }", eight)),
                 NpyError)
        << shape;
  // An empty array is fine, whatever its other dims.
  EXPECT_EQ(readImage(npyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1000000000000), }", ""))
                .f.size(), 0u);
  // A header longer than the file, a header without its keys or their ends, an unknown version.
  std::string longHeader = std::string("\x93NUMPY\x02\x00", 8) + std::string("\xff\xff\xff\x7f", 4) + "{";
  EXPECT_THROW(readImage(longHeader), NpyError);
  EXPECT_THROW(readImage(npyImage("{'descr': '<f8', 'fortran_order': False, 'shape': (1, ", eight)), NpyError);
  EXPECT_THROW(readImage(npyImage("{'descr'", eight)), NpyError);
  EXPECT_THROW(readImage(std::string("\x93NUMPY\x07\x00", 8)), NpyError);
  EXPECT_THROW(readImage(std::string("\x93NUM", 5)), NpyError);
}
