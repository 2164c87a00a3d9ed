// Tensors (rfuse/Runtime/Tensor.h) on the CPU: conversions from and to R's doubles and integers
// for every dtype (rounded exactly as HostTensor's APFloat conversions), programs run on tensors
// into new or caller-given tensors, device mismatches refused. The GPU side is in
// tests/gpu/GpuTest.cpp (DeviceTensors*).
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Interpreter.h"
#include "rfuse/Runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace rfuse;

namespace {

std::vector<double> awkwardDoubles() {
  std::vector<double> v = {0.0, -0.0, 1.0, -1.5, 3.14159265358979, 1e-8, -1e-5, 6.1e-5, 65504.0, 65519.9,
                           65520.0, 1e30, -1e38, 3.5e38, 1e-40, 1e-45, 2.0 / 3.0, 1.0 + 1.0 / 512, 1.0 + 3.0 / 512,
                           std::ldexp(1.0, -24), std::ldexp(1.5, -25), 257.0, 0.1};
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1000, 1000);
  for (int k = 0; k < 5000; ++k)
    v.push_back(u(rng) * std::pow(10.0, (int)(rng() % 12) - 6));
  return v;
}

TEST(Tensor, FloatDtypesRoundTripAsHostTensorRounds) {
  std::vector<double> v = awkwardDoubles();
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    Tensor t = emptyTensor(Device::Cpu, dt, {(int64_t)v.size()});
    copyFromDoubles(v.data(), t);
    std::vector<double> back(v.size());
    copyToDoubles(t, back.data());
    HostTensor ref = HostTensor::fromDoubles(dt, {(int64_t)v.size()}, v);
    for (size_t k = 0; k < v.size(); ++k)
      ASSERT_EQ(back[k], ref.f[k]) << dtypeName(dt) << " element " << k << " = " << v[k];
    // The bytes are the dtype's own format, as HostTensor writes them.
    EXPECT_EQ(std::memcmp(t.data(), ref.toBytes().data(), t.bytes()), 0) << dtypeName(dt);
  }
}

TEST(Tensor, NaNAndNAGoToNaNInFloatsAndAreRefusedInIntegers) {
  double na = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v = {1, na, 3};
  Tensor f = emptyTensor(Device::Cpu, DType::F32, {3});
  copyFromDoubles(v.data(), f);
  std::vector<double> back(3);
  copyToDoubles(f, back.data());
  EXPECT_TRUE(std::isnan(back[1]));
  for (DType dt : {DType::I32, DType::I64, DType::I1}) {
    Tensor t = emptyTensor(Device::Cpu, dt, {3});
    try {
      copyFromDoubles(v.data(), t);
      ADD_FAILURE() << dtypeName(dt) << " took a NaN";
    } catch (const std::invalid_argument &e) {
      EXPECT_NE(std::string(e.what()).find("element 2"), std::string::npos) << e.what();
    }
  }
  const int NA = std::numeric_limits<int>::min();
  std::vector<int> iv = {4, NA, -7};
  Tensor d = emptyTensor(Device::Cpu, DType::F64, {3});
  copyFromInts(iv.data(), NA, d);
  copyToDoubles(d, back.data());
  EXPECT_EQ(back[0], 4);
  EXPECT_TRUE(std::isnan(back[1]));
  EXPECT_EQ(back[2], -7);
  Tensor i = emptyTensor(Device::Cpu, DType::I32, {3});
  EXPECT_THROW(copyFromInts(iv.data(), NA, i), std::invalid_argument);
}

TEST(Tensor, IntegersTruncateSaturateAndComeBackAsInts) {
  std::vector<double> v = {2.7, -2.7, 3e9, -3e9, 0, 1};
  Tensor t = emptyTensor(Device::Cpu, DType::I32, {6});
  copyFromDoubles(v.data(), t);
  std::vector<int> back(6);
  copyToInts(t, back.data());
  EXPECT_EQ(back, (std::vector<int>{2, -2, 2147483647, -2147483647 - 1, 0, 1}));
  Tensor b = emptyTensor(Device::Cpu, DType::I1, {6});
  copyFromDoubles(v.data(), b);
  copyToInts(b, back.data());
  EXPECT_EQ(back, (std::vector<int>{1, 1, 1, 1, 0, 1}));
  Tensor f = emptyTensor(Device::Cpu, DType::F32, {6});
  EXPECT_THROW(copyToInts(f, back.data()), std::invalid_argument);
}

TEST(Tensor, LargeConversionsSplitOverThreadsGiveTheSameValues) {
  const int64_t n = (1 << 20) + 37; // several chunks, a ragged tail
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k)
    v[k] = std::sin((double)k) * 1000;
  Tensor t = emptyTensor(Device::Cpu, DType::F32, {n});
  copyFromDoubles(v.data(), t);
  const float *f = (const float *)t.data();
  for (int64_t k = 0; k < n; k += 9973)
    ASSERT_EQ(f[k], (float)v[k]) << k;
  ASSERT_EQ(f[n - 1], (float)v[n - 1]);
  std::vector<double> back(n);
  copyToDoubles(t, back.data());
  for (int64_t k = 0; k < n; k += 7919)
    ASSERT_EQ(back[k], (double)(float)v[k]) << k;
}

std::string chainModule(DType dt) {
  GraphBuilder g("main");
  TracedValue x = g.input({4, 5}, dt, "x"), y = g.input({4, 5}, dt, "y");
  TracedValue r = g.tanh(g.add(g.mul(x, y), g.exp(x)));
  TracedValue s = g.reduceSum(r, {1});
  g.finish({r, s});
  return g.moduleText();
}

TEST(Tensor, ProgramsRunOnTensorsAsOnHostTensors) {
  for (DType dt : {DType::F32, DType::F64}) {
    std::string text = chainModule(dt);
    auto program = compileProgram(text, "default");
    std::mt19937_64 rng(3);
    HostTensor x = test::randomTensor(dt, {4, 5}, rng), y = test::randomTensor(dt, {4, 5}, rng);
    std::vector<HostTensor> ref = interpretText(text, "main", {x, y});
    std::vector<Tensor> out = program->run({fromHostTensor(x, Device::Cpu), fromHostTensor(y, Device::Cpu)}, Device::Cpu);
    ASSERT_EQ(out.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(out[k].device(), Device::Cpu);
      HostTensor h = toHostTensor(out[k]);
      EXPECT_LE(test::maxRelError(h.f, ref[k].f), dt == DType::F64 ? 1e-12 : 1e-5) << k;
    }
    // Into caller-given results, twice alternating (what a training loop does).
    std::vector<Tensor> a = {emptyTensor(Device::Cpu, dt, {4, 5}), emptyTensor(Device::Cpu, dt, {4})};
    std::vector<Tensor> b = {emptyTensor(Device::Cpu, dt, {4, 5}), emptyTensor(Device::Cpu, dt, {4})};
    std::vector<Tensor> in = {fromHostTensor(x, Device::Cpu), fromHostTensor(y, Device::Cpu)};
    program->run(in, a, Device::Cpu);
    program->run(in, b, Device::Cpu);
    EXPECT_EQ(std::memcmp(a[1].data(), b[1].data(), a[1].bytes()), 0);
    EXPECT_LE(test::maxRelError(toHostTensor(b[1]).f, ref[1].f), dt == DType::F64 ? 1e-12 : 1e-5);
  }
}

TEST(Tensor, WrongDeviceDtypeOrShapeIsRefusedNamingTheInput) {
  std::string text = chainModule(DType::F32);
  auto program = compileProgram(text, "default");
  Tensor x = emptyTensor(Device::Cpu, DType::F32, {4, 5});
  try {
    program->run({x, x}, Device::Cuda);
    ADD_FAILURE() << "ran cpu tensors on cuda";
  } catch (const DeviceMismatchError &e) {
    EXPECT_NE(std::string(e.what()).find("input 1 is on cpu"), std::string::npos) << e.what();
  }
  Tensor wrong = emptyTensor(Device::Cpu, DType::F64, {4, 5});
  EXPECT_THROW(program->run({x, wrong}, Device::Cpu), InterpreterError);
  EXPECT_THROW(program->run({x}, Device::Cpu), InterpreterError);
  std::vector<Tensor> badOut = {emptyTensor(Device::Cpu, DType::F32, {4, 5})};
  EXPECT_THROW(program->run({x, x}, badOut, Device::Cpu), InterpreterError);
}

TEST(Tensor, StorageIsSharedAndTransfersAreNotCountedOnTheCpu) {
  TransferStats before = transferStats();
  Tensor a = emptyTensor(Device::Cpu, DType::F32, {8});
  Tensor b = a; // a second reference, not a copy
  EXPECT_EQ(a.data(), b.data());
  EXPECT_EQ(a.storage.use_count(), 2);
  Tensor c = cloneTensor(a);
  EXPECT_NE(c.data(), a.data());
  EXPECT_EQ(toDevice(a, Device::Cpu).data(), a.data());
  EXPECT_EQ(transferStats().hostToDeviceBytes, before.hostToDeviceBytes);
}

} // namespace
