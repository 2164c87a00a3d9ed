// The reference interpreter against independent float64 references on random, non-zero inputs.
// References are written here from the definitions (std:: math, naive loops), never through
// ScalarOps.h, so that a wrong scalar definition is caught too.
#include "TestUtil.h"

#include "rfuse/IR/ScalarOps.h"
#include "rfuse/Runtime/Interpreter.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>

using namespace rfuse;
using namespace rfuse::test;

namespace {

std::vector<HostTensor> run(const std::string &body, const std::vector<HostTensor> &inputs,
                            InterpreterOptions options = {}) {
  return interpretText(body, "main", inputs, options);
}

// ---- Unary ops -------------------------------------------------------------------------------

struct UnaryCase {
  const char *op;
  std::function<double(double)> ref;
  double lo, hi; // input domain
};
void PrintTo(const UnaryCase &c, std::ostream *os) { *os << c.op; }

const double kPi = 3.14159265358979323846;

std::vector<UnaryCase> unaryCases() {
  return {
      {"neg", [](double x) { return -x; }, -3, 3},
      {"abs", [](double x) { return std::fabs(x); }, -3, 3},
      {"exp", [](double x) { return std::exp(x); }, -3, 3},
      {"log", [](double x) { return std::log(x); }, 0.01, 5},
      {"sqrt", [](double x) { return std::sqrt(x); }, 0.01, 5},
      {"rsqrt", [](double x) { return 1.0 / std::sqrt(x); }, 0.01, 5},
      {"tanh", [](double x) { return std::tanh(x); }, -3, 3},
      {"sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -6, 6},
      {"relu", [](double x) { return x > 0 ? x : 0.0; }, -3, 3},
      {"gelu", [](double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }, -4, 4},
      {"gelu_tanh",
       [](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
       },
       -4, 4},
      {"sin", [](double x) { return std::sin(x); }, -6, 6},
      {"cos", [](double x) { return std::cos(x); }, -6, 6},
      {"floor", [](double x) { return std::floor(x); }, -6, 6},
      {"erfc", [](double x) { return std::erfc(x); }, -3, 3},
      {"round_even", [](double x) { return std::nearbyint(x); }, -6, 6},
      {"tan", [](double x) { return std::tan(x); }, -1.4, 1.4},
      {"atan", [](double x) { return std::atan(x); }, -4, 4},
      {"asin", [](double x) { return std::asin(x); }, -0.99, 0.99},
      {"acos", [](double x) { return std::acos(x); }, -0.99, 0.99},
      {"tgamma", [](double x) { return std::tgamma(x); }, 0.1, 6},
      {"lgamma", [](double x) { return std::lgamma(x); }, 0.1, 20},
  };
}

class UnaryOpTest : public ::testing::TestWithParam<std::tuple<UnaryCase, const char *>> {};

TEST_P(UnaryOpTest, MatchesFloat64Reference) {
  auto [c, elem] = GetParam();
  std::string elemStr = elem;
  DType dt = elemStr == "f64" ? DType::F64 : DType::F32;
  std::vector<int64_t> shape = {3, 7};
  std::string ty = tensorType(shape, elemStr);
  std::string opText = std::string(c.op) == "gelu_tanh"
                           ? "rfuse.gelu %x approximate = tanh : " + ty
                           : std::string("rfuse.") + c.op + " %x : " + ty;
  std::string text = "func.func @main(%x: " + ty + ") -> " + ty + " {\n  %0 = " + opText +
                     "\n  return %0 : " + ty + "\n}";
  std::mt19937_64 rng(std::hash<std::string>()(c.op));
  HostTensor x = randomTensor(dt, shape, rng, c.lo, c.hi);
  HostTensor y = run(text, {x})[0];
  ASSERT_EQ(y.shape, shape);
  std::vector<double> ref;
  for (double v : x.f)
    ref.push_back(c.ref(v));
  // f32: correctly rounded functions are within an ulp or two of the float64 value; GELU's
  // bound (ScalarOps.h, rf_erfc<float>) is 1.5e-6 on [-3, 3], 4.6e-6 on [-6, 6] (libm's erfcf:
  // 0.85e-6 and 2.8e-6: the rounding of x / sqrt 2 dominates).
  double err = maxRelError(y.f, ref, 1e-6);
  double f32Bound = std::string(c.op) == "gelu" ? 3e-6 : 1e-6;
  EXPECT_LT(err, dt == DType::F64 ? 1e-14 : f32Bound) << c.op << " " << elem << ": " << err;
}

INSTANTIATE_TEST_SUITE_P(AllUnary, UnaryOpTest,
                         ::testing::Combine(::testing::ValuesIn(unaryCases()),
                                            ::testing::Values("f32", "f64")),
                         [](const auto &info) {
                           return std::string(std::get<0>(info.param).op) + "_" +
                                  std::get<1>(info.param);
                         });

TEST(Interpreter, GeluKnownValues) {
  // Phi(1) = 0.841344746068543; the tanh form gives 0.841191990607...
  auto ty = "tensor<2xf64>";
  std::string text = std::string("func.func @main(%x: ") + ty + ") -> (" + ty + ", " + ty +
                     ") {\n %0 = rfuse.gelu %x : " + ty + "\n %1 = rfuse.gelu %x approximate = tanh : " +
                     ty + "\n return %0, %1 : " + ty + ", " + ty + "\n}";
  HostTensor x = HostTensor::fromDoubles(DType::F64, {2}, {1.0, -2.0});
  auto out = run(text, {x});
  EXPECT_NEAR(out[0].f[0], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(out[0].f[1], -2.0 * 0.022750131948179195, 1e-15);
  EXPECT_NEAR(out[1].f[0], 0.8411919906082768, 1e-12);
}

TEST(Interpreter, DigammaTrigammaMatchR) {
  // {x, digamma(x), trigamma(x)} printed by R 4.2 (an independent implementation: dpsifn).
  const double cases[][3] = {
      {9.9999999999999995e-07, -1000000.57721402, 1000000000001.645},
      {0.10000000000000001, -10.423754940411076, 101.43329915079275},
      {0.5, -1.9635100260214231, 4.934802200544679},
      {1, -0.57721566490153231, 1.6449340668482264},
      {2.5, 0.70315664064524341, 0.49035775610023491},
      {7.25, 1.9104535268837362, 0.14787923315893214},
      {19.899999999999999, 2.9653837242676788, 0.051534988983070656},
      {123.40000000000001, 4.8113737751162775, 0.0081366516108652628},
      {1000000, 13.81551005796419, 1.0000005000001672e-06},
      {-0.5, 0.036489973978577089, 8.934802200544679},
      {-2.2999999999999998, 3.3173231575618258, 14.7259121609613},
      {-7.9000000000000004, -7.5400072244194689, 103.23693140003927},
  };
  const int n = sizeof(cases) / sizeof(cases[0]);
  std::vector<double> xs;
  for (auto &c : cases)
    xs.push_back(c[0]);
  auto program = [](int64_t len) {
    std::string ty = tensorType({len}, "f64");
    return "func.func @main(%x: " + ty + ") -> (" + ty + ", " + ty + ") {\n %0 = rfuse.digamma %x : " + ty +
           "\n %1 = rfuse.trigamma %x : " + ty + "\n return %0, %1 : " + ty + ", " + ty + "\n}";
  };
  auto out = run(program(n), {HostTensor::fromDoubles(DType::F64, {n}, xs)});
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(out[0].f[i], cases[i][1], 1e-14 * std::max(1.0, std::fabs(cases[i][1]))) << "digamma " << cases[i][0];
    EXPECT_NEAR(out[1].f[i], cases[i][2], 1e-14 * std::max(1.0, std::fabs(cases[i][2]))) << "trigamma " << cases[i][0];
  }
  // The poles: digamma NaN, trigamma Inf (R's).
  auto poles = run(program(3), {HostTensor::fromDoubles(DType::F64, {3}, {0.0, -1.0, -4.0})});
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isnan(poles[0].f[i])) << i;
    EXPECT_TRUE(std::isinf(poles[1].f[i]) && poles[1].f[i] > 0) << i;
  }
}

// rfuse.solve: x · a = b through LAPACK (R's solve on a = A^T, b = B^T); NaN where R would stop.
TEST(Interpreter, SolveMatchesTheSystemAndRefusesSingularOnes) {
  auto program = [](double tol) {
    std::ostringstream os;
    os.precision(17);
    os << "func.func @main(%a: tensor<4x4xf64>, %b: tensor<3x4xf64>) -> tensor<3x4xf64> {\n"
       << " %x = rfuse.solve %a, %b tolerance = " << std::scientific << tol
       << " : (tensor<4x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>\n return %x : tensor<3x4xf64>\n}";
    return os.str();
  };
  std::mt19937_64 rng(11);
  HostTensor a = randomTensor(DType::F64, {4, 4}, rng, -1, 1), b = randomTensor(DType::F64, {3, 4}, rng, -1, 1);
  for (int i = 0; i < 4; ++i)
    a.f[i * 4 + i] += 4; // well conditioned
  HostTensor x = run(program(2.220446049250313e-16), {a, b})[0];
  for (int r = 0; r < 3; ++r) // x · a = b
    for (int c = 0; c < 4; ++c) {
      double s = 0;
      for (int k = 0; k < 4; ++k)
        s += x.f[r * 4 + k] * a.f[k * 4 + c];
      EXPECT_NEAR(s, b.f[r * 4 + c], 1e-13) << r << "," << c;
    }
  HostTensor singular = a;
  for (int c = 0; c < 4; ++c)
    singular.f[3 * 4 + c] = 0; // a zero row of a (a zero column of R's A): U has an exact 0
  HostTensor xs = run(program(0), {singular, b})[0];
  for (double v : xs.f)
    EXPECT_TRUE(std::isnan(v)); // exactly singular, even with tolerance 0
  HostTensor nearly = a;
  for (int c = 0; c < 4; ++c)
    nearly.f[3 * 4 + c] = nearly.f[1 * 4 + c] * (1 + 1e-15);
  HostTensor xn = run(program(1e-8), {nearly, b})[0];
  for (double v : xn.f)
    EXPECT_TRUE(std::isnan(v)); // reciprocal condition below the tolerance
}

// rfuse.cholesky / rfuse.log_determinant: R's chol() and determinant() through LAPACK.
TEST(Interpreter, CholeskyAndLogDeterminantAreLapacks) {
  std::mt19937_64 rng(12);
  HostTensor m = randomTensor(DType::F64, {3, 3}, rng, -1, 1), a(DType::F64, {3, 3});
  for (int i = 0; i < 3; ++i) // a = m^T m + 3 I: symmetric positive definite
    for (int j = 0; j < 3; ++j) {
      double s = i == j ? 3 : 0;
      for (int k = 0; k < 3; ++k)
        s += m.f[k * 3 + i] * m.f[k * 3 + j];
      a.f[i * 3 + j] = s;
    }
  std::string text = "func.func @main(%a: tensor<3x3xf64>) -> (tensor<3x3xf64>, tensor<2xf64>) {\n"
                     " %u = rfuse.cholesky %a : tensor<3x3xf64>\n"
                     " %d = rfuse.log_determinant %a : (tensor<3x3xf64>) -> tensor<2xf64>\n"
                     " return %u, %d : tensor<3x3xf64>, tensor<2xf64>\n}";
  auto out = run(text, {a});
  // The tensor holds U^T (R's layout): t[i][j] = U[j][i], zero for j > i; U^T U = A.
  const std::vector<double> &t = out[0].f;
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      EXPECT_EQ(t[i * 3 + j], 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k)
        s += t[i * 3 + k] * t[j * 3 + k];
      EXPECT_NEAR(s, a.f[i * 3 + j], 1e-12);
    }
  double det = a.f[0] * (a.f[4] * a.f[8] - a.f[5] * a.f[7]) - a.f[1] * (a.f[3] * a.f[8] - a.f[5] * a.f[6]) +
               a.f[2] * (a.f[3] * a.f[7] - a.f[4] * a.f[6]);
  EXPECT_NEAR(out[1].f[0], std::log(std::fabs(det)), 1e-12);
  EXPECT_EQ(out[1].f[1], det < 0 ? -1.0 : 1.0);
  HostTensor indefinite = a;
  indefinite.f[0] = -1; // not positive definite: NaN; and its determinant's sign flips with it
  auto bad = run(text, {indefinite});
  for (double v : bad[0].f)
    EXPECT_TRUE(std::isnan(v));
}

// ---- Binary, compare, logic, select ------------------------------------------------------------

struct BinaryCase {
  const char *op;
  std::function<double(double, double)> ref;
  double lo, hi;
};
void PrintTo(const BinaryCase &c, std::ostream *os) { *os << c.op; }

class BinaryOpTest : public ::testing::TestWithParam<std::tuple<BinaryCase, const char *>> {};

TEST_P(BinaryOpTest, MatchesFloat64Reference) {
  auto [c, elem] = GetParam();
  std::string elemStr = elem;
  DType dt = elemStr == "f64" ? DType::F64 : elemStr == "f32" ? DType::F32 : DType::I32;
  std::vector<int64_t> shape = {4, 5};
  std::string ty = tensorType(shape, elemStr);
  std::string text = "func.func @main(%a: " + ty + ", %b: " + ty + ") -> " + ty +
                     " {\n  %0 = rfuse." + c.op + " %a, %b : " + ty + "\n  return %0 : " + ty +
                     "\n}";
  std::mt19937_64 rng(7);
  HostTensor a = randomTensor(dt, shape, rng, c.lo, c.hi), b = randomTensor(dt, shape, rng, c.lo, c.hi);
  HostTensor y = run(text, {a, b})[0];
  std::vector<double> got, ref;
  for (int64_t k = 0; k < y.numel(); ++k) {
    got.push_back(y.get(k));
    ref.push_back(c.ref(a.get(k), b.get(k)));
  }
  double tol = dt == DType::F64 ? 1e-15 : dt == DType::F32 ? 1e-6 : 0.0;
  double err = maxRelError(got, ref);
  EXPECT_LE(err, tol) << c.op << " " << elem << ": " << err;
}

std::vector<BinaryCase> arithmeticCases() {
  return {{"add", [](double a, double b) { return a + b; }, -3, 3},
          {"sub", [](double a, double b) { return a - b; }, -3, 3},
          {"mul", [](double a, double b) { return a * b; }, -3, 3},
          {"max", [](double a, double b) { return std::max(a, b); }, -3, 3},
          {"min", [](double a, double b) { return std::min(a, b); }, -3, 3}};
}

INSTANTIATE_TEST_SUITE_P(Arithmetic, BinaryOpTest,
                         ::testing::Combine(::testing::ValuesIn(arithmeticCases()),
                                            ::testing::Values("f32", "f64", "i32")),
                         [](const auto &info) {
                           return std::string(std::get<0>(info.param).op) + "_" +
                                  std::get<1>(info.param);
                         });

INSTANTIATE_TEST_SUITE_P(FloatOnly, BinaryOpTest,
                         ::testing::Combine(::testing::Values(
                                                BinaryCase{"div", [](double a, double b) { return a / b; }, -3, 3},
                                                BinaryCase{"pow", [](double a, double b) { return std::pow(a, b); }, 0.1, 3},
                                                BinaryCase{"atan2", [](double a, double b) { return std::atan2(a, b); }, -2, 2}),
                                            ::testing::Values("f32", "f64")),
                         [](const auto &info) {
                           return std::string(std::get<0>(info.param).op) + "_" +
                                  std::get<1>(info.param);
                         });

TEST(Interpreter, MaxMinPropagateNaN) {
  std::string text = R"(func.func @main(%a: tensor<3xf64>, %b: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>) {
    %0 = rfuse.max %a, %b : tensor<3xf64>
    %1 = rfuse.min %a, %b : tensor<3xf64>
    return %0, %1 : tensor<3xf64>, tensor<3xf64>
  })";
  double nan = std::nan("");
  auto out = run(text, {HostTensor::fromDoubles(DType::F64, {3}, {nan, 1.0, 2.0}),
                        HostTensor::fromDoubles(DType::F64, {3}, {1.0, nan, -2.0})});
  EXPECT_TRUE(std::isnan(out[0].f[0]));
  EXPECT_TRUE(std::isnan(out[0].f[1]));
  EXPECT_EQ(out[0].f[2], 2.0);
  EXPECT_TRUE(std::isnan(out[1].f[0]));
  EXPECT_TRUE(std::isnan(out[1].f[1]));
  EXPECT_EQ(out[1].f[2], -2.0);
}

// rfuse.sort along the middle dim of a 3-d tensor with ties and NaN, against a naive stable
// insertion sort per line; take_along by the indices gives the values again.
TEST(Interpreter, SortIsStableWithNaNLastAndTakeAlongInvertsIt) {
  std::string text = R"(func.func @main(%x: tensor<2x5x3xf64>) -> (tensor<2x5x3xf64>, tensor<2x5x3xi64>, tensor<2x5x3xf64>) {
    %v, %i = rfuse.sort %x, dim = 1 {descending} : tensor<2x5x3xf64>
    %t = rfuse.take_along %x, %i, dim = 1 : (tensor<2x5x3xf64>, tensor<2x5x3xi64>) -> tensor<2x5x3xf64>
    return %v, %i, %t : tensor<2x5x3xf64>, tensor<2x5x3xi64>, tensor<2x5x3xf64>
  })";
  std::vector<double> x(30);
  for (int k = 0; k < 30; ++k)
    x[k] = (double)((k * 7) % 4); // ties
  x[4] = std::nan("");
  x[20] = std::nan("");
  auto out = run(text, {HostTensor::fromDoubles(DType::F64, {2, 5, 3}, x)});
  for (int o = 0; o < 2; ++o)
    for (int in = 0; in < 3; ++in) {
      auto at = [&](int j) { return (o * 5 + j) * 3 + in; };
      std::vector<int> order; // insertion sort: stable; NaN last, larger first
      for (int j = 0; j < 5; ++j) {
        auto after = [&](int a, int b) { // a's element goes after b's
          double va = x[at(a)], vb = x[at(b)];
          if (std::isnan(va)) return true;
          if (std::isnan(vb)) return false;
          return va <= vb;
        };
        size_t p = order.size();
        while (p > 0 && !after(j, order[p - 1]))
          --p;
        order.insert(order.begin() + p, j);
      }
      for (int j = 0; j < 5; ++j) {
        EXPECT_EQ(out[1].i[at(j)], order[j]) << "line " << o << "," << in << " position " << j;
        double want = x[at(order[j])];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(out[0].f[at(j)]));
          EXPECT_TRUE(std::isnan(out[2].f[at(j)]));
        } else {
          EXPECT_EQ(out[0].f[at(j)], want);
          EXPECT_EQ(out[2].f[at(j)], want);
        }
      }
    }
}

TEST(Interpreter, CompareEveryPredicate) {
  const char *preds[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  std::function<bool(double, double)> refs[] = {
      [](double a, double b) { return a == b; }, [](double a, double b) { return a != b; },
      [](double a, double b) { return a < b; },  [](double a, double b) { return a <= b; },
      [](double a, double b) { return a > b; },  [](double a, double b) { return a >= b; }};
  // Equal pairs and a NaN included, so eq/le/ge and the IEEE NaN rules are exercised.
  HostTensor a = HostTensor::fromDoubles(DType::F32, {5}, {1.5, -2, 3, std::nan(""), 0.25});
  HostTensor b = HostTensor::fromDoubles(DType::F32, {5}, {1.5, 2, -3, 1, 0.5});
  for (int p = 0; p < 6; ++p) {
    std::string text = std::string("func.func @main(%a: tensor<5xf32>, %b: tensor<5xf32>) -> "
                                   "tensor<5xi1> {\n %0 = rfuse.compare ") +
                       preds[p] + ", %a, %b : tensor<5xf32>\n return %0 : tensor<5xi1>\n}";
    HostTensor m = run(text, {a, b})[0];
    ASSERT_EQ(m.dtype, DType::I1);
    for (int k = 0; k < 5; ++k)
      EXPECT_EQ(m.i[k], refs[p](a.f[k], b.f[k]) ? 1 : 0) << preds[p] << " element " << k;
  }
}

TEST(Interpreter, LogicAndSelect) {
  std::string text = R"(func.func @main(%p: tensor<4xi1>, %q: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf32>)
      -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>) {
    %0 = rfuse.and %p, %q : tensor<4xi1>
    %1 = rfuse.or %p, %q : tensor<4xi1>
    %2 = rfuse.not %p : tensor<4xi1>
    %3 = rfuse.select %p, %x, %y : tensor<4xi1>, tensor<4xf32>
    return %0, %1, %2, %3 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>
  })";
  HostTensor p(DType::I1, {4}), q(DType::I1, {4});
  p.i = {0, 0, 1, 1};
  q.i = {0, 1, 0, 1};
  HostTensor x = HostTensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4});
  HostTensor y = HostTensor::fromDoubles(DType::F32, {4}, {-1, -2, -3, -4});
  auto out = run(text, {p, q, x, y});
  EXPECT_EQ(out[0].i, (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(out[1].i, (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(out[2].i, (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(out[3].f, (std::vector<double>{-1, -2, 3, 4}));
}

TEST(Interpreter, CastRoundsAndTruncates) {
  std::string text = R"(func.func @main(%x: tensor<4xf64>) -> (tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xi32>, tensor<4xi1>) {
    %0 = rfuse.cast %x : tensor<4xf64> to tensor<4xf32>
    %1 = rfuse.cast %x : tensor<4xf64> to tensor<4xf16>
    %2 = rfuse.cast %x : tensor<4xf64> to tensor<4xbf16>
    %3 = rfuse.cast %x : tensor<4xf64> to tensor<4xi32>
    %4 = rfuse.cast %x : tensor<4xf64> to tensor<4xi1>
    return %0, %1, %2, %3, %4 : tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xi32>, tensor<4xi1>
  })";
  HostTensor x = HostTensor::fromDoubles(DType::F64, {4}, {1.0 / 3.0, -2.7, 1000.06, 0.0});
  auto out = run(text, {x});
  EXPECT_EQ(out[0].f[0], (double)(1.0f / 3.0f));
  EXPECT_EQ(out[1].f[0], 0.333251953125);       // nearest binary16 to 1/3
  EXPECT_EQ(out[1].f[2], 1000.0);               // binary16 spacing is 0.5 near 1000
  EXPECT_EQ(out[2].f[0], 0.333984375);          // nearest bfloat16 to 1/3
  EXPECT_EQ(out[2].f[2], 1000.0);               // bfloat16 spacing is 4 near 1000
  EXPECT_EQ(out[3].i, (std::vector<int64_t>{0, -2, 1000, 0}));
  EXPECT_EQ(out[4].i, (std::vector<int64_t>{1, 1, 1, 0}));
}

TEST(Interpreter, Float16ComputesInFloat32AndRounds) {
  std::string text = R"(func.func @main(%a: tensor<3xf16>, %b: tensor<3xf16>) -> tensor<3xf16> {
    %0 = rfuse.add %a, %b : tensor<3xf16>
    return %0 : tensor<3xf16>
  })";
  HostTensor a = HostTensor::fromDoubles(DType::F16, {3}, {1.0, 2048.0, 0.1});
  HostTensor b = HostTensor::fromDoubles(DType::F16, {3}, {0.0009765625, 1.0, 0.2});
  HostTensor y = run(text, {a, b})[0];
  EXPECT_EQ(y.f[0], 1.0009765625);          // representable: exact
  EXPECT_EQ(y.f[1], 2048.0);                // 2049 rounds to even (spacing 2)
  EXPECT_EQ(y.f[2], roundToDType(DType::F16, (float)a.f[2] + (float)b.f[2]));
}

// ---- Data movement ---------------------------------------------------------------------------

TEST(Interpreter, BroadcastInDimEachAxis) {
  // [3] -> [2, 3] along dim 1, [2] -> [2, 3] along dim 0, [2, 1] -> [2, 3] stretching dim 1.
  std::string text = R"(func.func @main(%r: tensor<3xf64>, %c: tensor<2xf64>, %k: tensor<2x1xf64>)
      -> (tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<4x2x3xf64>) {
    %0 = rfuse.broadcast_in_dim %r, dims = [1] : (tensor<3xf64>) -> tensor<2x3xf64>
    %1 = rfuse.broadcast_in_dim %c, dims = [0] : (tensor<2xf64>) -> tensor<2x3xf64>
    %2 = rfuse.broadcast_in_dim %k, dims = [0, 1] : (tensor<2x1xf64>) -> tensor<2x3xf64>
    %3 = rfuse.broadcast_in_dim %k, dims = [1, 2] : (tensor<2x1xf64>) -> tensor<4x2x3xf64>
    return %0, %1, %2, %3 : tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<4x2x3xf64>
  })";
  auto out = run(text, {HostTensor::fromDoubles(DType::F64, {3}, {1, 2, 3}),
                        HostTensor::fromDoubles(DType::F64, {2}, {10, 20}),
                        HostTensor::fromDoubles(DType::F64, {2, 1}, {5, 7})});
  EXPECT_EQ(out[0].f, (std::vector<double>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(out[1].f, (std::vector<double>{10, 10, 10, 20, 20, 20}));
  EXPECT_EQ(out[2].f, (std::vector<double>{5, 5, 5, 7, 7, 7}));
  ASSERT_EQ(out[3].numel(), 24);
  for (int b = 0; b < 4; ++b)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(out[3].f[(b * 2 + i) * 3 + j], i == 0 ? 5 : 7);
}

TEST(Interpreter, Transpose3D) {
  std::string text = R"(func.func @main(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
    %0 = rfuse.transpose %x, perm = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
    return %0 : tensor<4x2x3xf32>
  })";
  std::mt19937_64 rng(3);
  HostTensor x = randomTensor(DType::F32, {2, 3, 4}, rng);
  HostTensor y = run(text, {x})[0];
  ASSERT_EQ(y.shape, (std::vector<int64_t>{4, 2, 3}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(y.f[(k * 2 + i) * 3 + j], x.f[(i * 3 + j) * 4 + k]);
}

TEST(Interpreter, ReshapeKeepsRowMajorOrder) {
  std::string text = R"(func.func @main(%x: tensor<2x6xi64>) -> tensor<3x4xi64> {
    %0 = rfuse.reshape %x : (tensor<2x6xi64>) -> tensor<3x4xi64>
    return %0 : tensor<3x4xi64>
  })";
  HostTensor x(DType::I64, {2, 6});
  for (int k = 0; k < 12; ++k)
    x.i[k] = 100 + k;
  HostTensor y = run(text, {x})[0];
  EXPECT_EQ(y.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(y.i, x.i);
}

TEST(Interpreter, Constants) {
  std::string text = R"(func.func @main() -> (tensor<2x2xf64>, tensor<3xf32>, tensor<2xi1>) {
    %0 = rfuse.constant dense<[[1.5, 2.0], [-3.0, 4.25]]> : tensor<2x2xf64>
    %1 = rfuse.constant dense<0.1> : tensor<3xf32>
    %2 = rfuse.constant dense<[true, false]> : tensor<2xi1>
    return %0, %1, %2 : tensor<2x2xf64>, tensor<3xf32>, tensor<2xi1>
  })";
  auto out = run(text, {});
  EXPECT_EQ(out[0].f, (std::vector<double>{1.5, 2.0, -3.0, 4.25}));
  EXPECT_EQ(out[1].f, (std::vector<double>(3, (double)0.1f)));
  EXPECT_EQ(out[2].i, (std::vector<int64_t>{1, 0}));
}

// ---- Reductions over each axis -----------------------------------------------------------------

class ReduceTest : public ::testing::TestWithParam<std::tuple<const char *, int, bool>> {};

TEST_P(ReduceTest, EachAxisMatchesReference) {
  auto [kind, axis, keep] = GetParam();
  std::vector<int64_t> shape = {3, 4, 5}, outShape;
  for (int d = 0; d < 3; ++d)
    if (d != axis)
      outShape.push_back(shape[d]);
    else if (keep)
      outShape.push_back(1);
  std::string in = tensorType(shape, "f64"), out = tensorType(outShape, "f64");
  std::string text = "func.func @main(%x: " + in + ") -> " + out + " {\n  %0 = rfuse." + kind +
                     " %x, dims = [" + std::to_string(axis) + "] {keep_dims = " +
                     (keep ? "true" : "false") + "} : (" + in + ") -> " + out +
                     "\n  return %0 : " + out + "\n}";
  std::mt19937_64 rng(axis * 10 + keep);
  HostTensor x = randomTensor(DType::F64, shape, rng);
  HostTensor y = run(text, {x})[0];
  ASSERT_EQ(y.shape, outShape);
  std::vector<double> ref;
  for (int i = 0; i < (axis == 0 ? 1 : 3); ++i)
    for (int j = 0; j < (axis == 1 ? 1 : 4); ++j)
      for (int k = 0; k < (axis == 2 ? 1 : 5); ++k) {
        std::string kd = kind;
        double acc = kd == "reduce_max" ? -INFINITY : kd == "reduce_min" ? INFINITY : 0.0;
        for (int r = 0; r < shape[axis]; ++r) {
          int ii = axis == 0 ? r : i, jj = axis == 1 ? r : j, kk = axis == 2 ? r : k;
          double v = x.f[(ii * 4 + jj) * 5 + kk];
          acc = kd == "reduce_max" ? std::max(acc, v) : kd == "reduce_min" ? std::min(acc, v) : acc + v;
        }
        ref.push_back(kd == "reduce_mean" ? acc / shape[axis] : acc);
      }
  EXPECT_LT(maxRelError(y.f, ref), 1e-14);
}

INSTANTIATE_TEST_SUITE_P(AllAxes, ReduceTest,
                         ::testing::Combine(::testing::Values("reduce_sum", "reduce_mean",
                                                              "reduce_max", "reduce_min"),
                                            ::testing::Values(0, 1, 2), ::testing::Bool()),
                         [](const auto &info) {
                           return std::string(std::get<0>(info.param)) + "_axis" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_keep" : "");
                         });

TEST(Interpreter, ReduceOverSeveralDimsInFloat32) {
  std::string text = R"(func.func @main(%x: tensor<6x7x8xf32>) -> tensor<7xf32> {
    %0 = rfuse.reduce_sum %x, dims = [0, 2] : (tensor<6x7x8xf32>) -> tensor<7xf32>
    return %0 : tensor<7xf32>
  })";
  std::mt19937_64 rng(11);
  HostTensor x = randomTensor(DType::F32, {6, 7, 8}, rng);
  HostTensor y = run(text, {x})[0];
  std::vector<double> ref(7, 0.0);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 7; ++j)
      for (int k = 0; k < 8; ++k)
        ref[j] += x.f[(i * 7 + j) * 8 + k];
  EXPECT_LT(maxRelError(y.f, ref, 1e-3), 1e-6);
}

// ---- Matmul ----------------------------------------------------------------------------------

class MatmulTest : public ::testing::TestWithParam<std::tuple<bool, bool, int>> {};

TEST_P(MatmulTest, MatchesNaiveProduct) {
  auto [ta, tb, batchMode] = GetParam(); // batchMode: 0 none, 1 both batched, 2 lhs batched only
  int64_t B = 3, M = 4, K = 5, N = 6;
  std::vector<int64_t> aShape = ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K};
  std::vector<int64_t> bShape = tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
  std::vector<int64_t> oShape = {M, N};
  if (batchMode >= 1) {
    aShape.insert(aShape.begin(), B);
    oShape.insert(oShape.begin(), B);
  }
  if (batchMode == 1)
    bShape.insert(bShape.begin(), B);
  std::string at = tensorType(aShape, "f64"), bt = tensorType(bShape, "f64"),
              ot = tensorType(oShape, "f64");
  std::string text = "func.func @main(%a: " + at + ", %b: " + bt + ") -> " + ot +
                     " {\n %0 = rfuse.matmul %a, %b {transpose_a = " + (ta ? "true" : "false") +
                     ", transpose_b = " + (tb ? "true" : "false") + "} : (" + at + ", " + bt +
                     ") -> " + ot + "\n return %0 : " + ot + "\n}";
  std::mt19937_64 rng(ta * 4 + tb * 2 + batchMode);
  HostTensor a = randomTensor(DType::F64, aShape, rng), b = randomTensor(DType::F64, bShape, rng);
  HostTensor y = run(text, {a, b})[0];
  ASSERT_EQ(y.shape, oShape);
  std::vector<double> ref;
  for (int64_t p = 0; p < (batchMode ? B : 1); ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          double av = a.f[(batchMode ? p * M * K : 0) + (ta ? k * M + i : i * K + k)];
          double bv = b.f[(batchMode == 1 ? p * K * N : 0) + (tb ? j * K + k : k * N + j)];
          acc += av * bv;
        }
        ref.push_back(acc);
      }
  EXPECT_LT(maxRelError(y.f, ref), 1e-13);
}

INSTANTIATE_TEST_SUITE_P(Flags, MatmulTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(0, 1, 2)));

// ---- Convolution and pooling -------------------------------------------------------------------

TEST(Interpreter, Conv2dHandComputed) {
  // 1x1x3x3 input 1..9, 2x2 all-ones filter, bias 0.5: each output is a 2x2 window sum + 0.5.
  std::string text = R"(func.func @main(%x: tensor<1x1x3x3xf64>, %w: tensor<1x1x2x2xf64>, %b: tensor<1xf64>) -> tensor<1x1x2x2xf64> {
    %0 = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x3x3xf64>, tensor<1x1x2x2xf64>, tensor<1xf64>) -> tensor<1x1x2x2xf64>
    return %0 : tensor<1x1x2x2xf64>
  })";
  HostTensor x = HostTensor::fromDoubles(DType::F64, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  HostTensor w = HostTensor::fromDoubles(DType::F64, {1, 1, 2, 2}, {1, 1, 1, 1});
  HostTensor b = HostTensor::fromDoubles(DType::F64, {1}, {0.5});
  HostTensor y = run(text, {x, w, b})[0];
  EXPECT_EQ(y.f, (std::vector<double>{12.5, 16.5, 24.5, 28.5}));
}

// Naive NCHW reference with stride, padding, dilation and groups.
std::vector<double> convReference(const HostTensor &x, const HostTensor &w, int64_t stride,
                                  int64_t pad, int64_t dil, int64_t groups, int64_t OH, int64_t OW) {
  int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  int64_t O = w.shape[0], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          int64_t g = o / (O / groups);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t h = oh * stride - pad + kh * dil, ww = ow * stride - pad + kw * dil;
                if (h >= 0 && h < H && ww >= 0 && ww < W)
                  acc += x.f[((n * C + g * Cg + c) * H + h) * W + ww] *
                         w.f[((o * Cg + c) * KH + kh) * KW + kw];
              }
          out.push_back(acc);
        }
  (void)C;
  return out;
}

TEST(Interpreter, Conv2dStridePaddingDilationGroupsAndNHWC) {
  // N=2, C=4, H=9, W=8; O=6, groups=2, 3x3 kernel, stride 2, padding 1, dilation 2.
  std::string ncwh = R"(func.func @main(%x: tensor<2x4x9x8xf64>, %w: tensor<6x2x3x3xf64>) -> tensor<2x6x4x3xf64> {
    %0 = rfuse.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilation = array<i64: 2, 2>, groups = 2 : i64, layout = #rfuse.layout<NCHW>} : (tensor<2x4x9x8xf64>, tensor<6x2x3x3xf64>) -> tensor<2x6x4x3xf64>
    return %0 : tensor<2x6x4x3xf64>
  })";
  std::mt19937_64 rng(5);
  HostTensor x = randomTensor(DType::F64, {2, 4, 9, 8}, rng), w = randomTensor(DType::F64, {6, 2, 3, 3}, rng);
  HostTensor y = run(ncwh, {x, w})[0];
  ASSERT_EQ(y.shape, (std::vector<int64_t>{2, 6, 4, 3}));
  EXPECT_LT(maxRelError(y.f, convReference(x, w, 2, 1, 2, 2, 4, 3)), 1e-13);

  // The same convolution in NHWC (input transposed, filter OHWI) gives the transposed result.
  std::string nhwc = R"(func.func @main(%x: tensor<2x9x8x4xf64>, %w: tensor<6x3x3x2xf64>) -> tensor<2x4x3x6xf64> {
    %0 = rfuse.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilation = array<i64: 2, 2>, groups = 2 : i64, layout = #rfuse.layout<NHWC>} : (tensor<2x9x8x4xf64>, tensor<6x3x3x2xf64>) -> tensor<2x4x3x6xf64>
    return %0 : tensor<2x4x3x6xf64>
  })";
  HostTensor xh(DType::F64, {2, 9, 8, 4}), wh(DType::F64, {6, 3, 3, 2});
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 4; ++c)
      for (int h = 0; h < 9; ++h)
        for (int ww = 0; ww < 8; ++ww)
          xh.f[((n * 9 + h) * 8 + ww) * 4 + c] = x.f[((n * 4 + c) * 9 + h) * 8 + ww];
  for (int o = 0; o < 6; ++o)
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 3; ++h)
        for (int ww = 0; ww < 3; ++ww)
          wh.f[((o * 3 + h) * 3 + ww) * 2 + c] = w.f[((o * 2 + c) * 3 + h) * 3 + ww];
  HostTensor yh = run(nhwc, {xh, wh})[0];
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 6; ++o)
      for (int h = 0; h < 4; ++h)
        for (int ww = 0; ww < 3; ++ww)
          EXPECT_NEAR(yh.f[((n * 4 + h) * 3 + ww) * 6 + o], y.f[((n * 6 + o) * 4 + h) * 3 + ww], 1e-12);
}

TEST(Interpreter, PoolingMaxAndAverage) {
  std::string text = R"(func.func @main(%x: tensor<1x1x4x4xf64>) -> (tensor<1x1x2x2xf64>, tensor<1x1x2x2xf64>, tensor<1x1x3x3xf64>, tensor<1x1x3x3xf64>) {
    %0 = rfuse.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf64>) -> tensor<1x1x2x2xf64>
    %1 = rfuse.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf64>) -> tensor<1x1x2x2xf64>
    %2 = rfuse.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf64>) -> tensor<1x1x3x3xf64>
    %3 = rfuse.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, layout = #rfuse.layout<NCHW>, count_include_pad = false} : (tensor<1x1x4x4xf64>) -> tensor<1x1x3x3xf64>
    return %0, %1, %2, %3 : tensor<1x1x2x2xf64>, tensor<1x1x2x2xf64>, tensor<1x1x3x3xf64>, tensor<1x1x3x3xf64>
  })";
  std::vector<double> v;
  for (int k = 1; k <= 16; ++k)
    v.push_back(k);
  auto out = run(text, {HostTensor::fromDoubles(DType::F64, {1, 1, 4, 4}, v)});
  EXPECT_EQ(out[0].f, (std::vector<double>{6, 8, 14, 16}));
  EXPECT_EQ(out[1].f, (std::vector<double>{3.5, 5.5, 11.5, 13.5}));
  // Corner window with padding: only x[0][0] = 1 is inside; /4 with count_include_pad, /1 without.
  EXPECT_EQ(out[2].f[0], 0.25);
  EXPECT_EQ(out[3].f[0], 1.0);
  EXPECT_EQ(out[3].f[4], (6 + 7 + 10 + 11) / 4.0);
}

// ---- Fusion bodies, calls, options, errors ------------------------------------------------------

TEST(Interpreter, FusionBodyAndCall) {
  std::string text = R"(
  func.func private @helper(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = rfuse.tanh %a : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
  func.func @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
    %f:2 = rfuse.fusion pointwise (%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
    ^bb0(%a: tensor<3xf32>, %b: tensor<3xf32>):
      %s = rfuse.mul %a, %b : tensor<3xf32>
      %e = rfuse.exp %s : tensor<3xf32>
      rfuse.yield %e, %s : tensor<3xf32>, tensor<3xf32>
    }
    %c = func.call @helper(%f#0) : (tensor<3xf32>) -> tensor<3xf32>
    return %c, %f#1 : tensor<3xf32>, tensor<3xf32>
  })";
  HostTensor x = HostTensor::fromDoubles(DType::F32, {3}, {0.5, -1, 0.25});
  HostTensor y = HostTensor::fromDoubles(DType::F32, {3}, {2, 0.5, -3});
  auto out = run(text, {x, y});
  for (int k = 0; k < 3; ++k) {
    double s = x.f[k] * y.f[k];
    EXPECT_NEAR(out[1].f[k], s, 1e-7);
    EXPECT_NEAR(out[0].f[k], std::tanh(std::exp(s)), 1e-6);
  }
}

TEST(Interpreter, Float64OverrideComputesF32GraphInDouble) {
  std::string text = R"(func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = rfuse.exp %x : tensor<2xf32>
    return %0 : tensor<2xf32>
  })";
  HostTensor x = HostTensor::fromDoubles(DType::F32, {2}, {0.1, 1.7});
  InterpreterOptions f64;
  f64.floatOverride = DType::F64;
  HostTensor d = run(text, {x}, f64)[0];
  HostTensor s = run(text, {x})[0];
  EXPECT_EQ(d.dtype, DType::F64);
  EXPECT_EQ(d.f[1], std::exp(x.f[1]));            // full double precision
  EXPECT_EQ(s.f[1], (double)std::exp((float)x.f[1])); // float math, as declared
  EXPECT_NE(d.f[1], s.f[1]);
}

TEST(Interpreter, IntegerArithmeticWraps) {
  std::string text = R"(func.func @main(%a: tensor<2xi32>, %b: tensor<2xi32>) -> tensor<2xi32> {
    %0 = rfuse.add %a, %b : tensor<2xi32>
    return %0 : tensor<2xi32>
  })";
  HostTensor a(DType::I32, {2}), b(DType::I32, {2});
  a.i = {2147483647, -5};
  b.i = {1, 3};
  EXPECT_EQ(run(text, {a, b})[0].i, (std::vector<int64_t>{-2147483648LL, -2}));
}

TEST(Interpreter, RejectsBadInputs) {
  std::string text = R"(func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    return %x : tensor<2x3xf32>
  })";
  HostTensor good(DType::F32, {2, 3}), bad(DType::F32, {3, 2});
  EXPECT_THROW(run(text, {}), InterpreterError);
  try {
    run(text, {bad});
    FAIL() << "shape mismatch accepted";
  } catch (const InterpreterError &e) {
    EXPECT_NE(std::string(e.what()).find("has shape tensor<3x2xf32>, expected tensor<2x3xf32>"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(interpretText(text, "nope", {good}), InterpreterError);
  EXPECT_THROW(interpretText("func.func @main( {", "main", {}), InterpreterError);
}

} // namespace

// Philox4x32-10 against Random123's known-answer vectors (kat_vectors), then rfuse.random_uniform:
// each element is word 0 of the block at its flat index, its top 24 bits times 2^-24; draws are
// in [0, 1), look uniform, and depend on the whole key.
TEST(Interpreter, RandomUniformIsPhiloxAtEachIndex) {
  struct Kat {
    unsigned int c[4], k0, k1, want[4];
  } kats[] = {
      {{0, 0, 0, 0}, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xffffffffu, 0xffffffffu,
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0xa4093822u, 0x299f31d0u,
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (Kat &k : kats) {
    scalar::rf_philox4x32_10(k.c, k.k0, k.k1);
    for (int w = 0; w < 4; ++w)
      EXPECT_EQ(k.c[w], k.want[w]) << "word " << w;
  }
  const int64_t n = 100000;
  auto draws = [&](int32_t k0, int32_t k1) {
    HostTensor key(DType::I32, {2});
    key.i = {k0, k1};
    return run("func.func @main(%k: tensor<2xi32>) -> tensor<400x250xf32> {\n"
               "  %u = rfuse.random_uniform %k : tensor<2xi32> -> tensor<400x250xf32>\n"
               "  return %u : tensor<400x250xf32>\n}\n",
               {key})[0];
  };
  HostTensor u = draws(20261207, -5);
  ASSERT_EQ(u.numel(), n);
  EXPECT_DOUBLE_EQ(draws(0, 0).f[0], (double)(0x6627e8d5u >> 8) / 16777216.0);
  double sum = 0, below = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_GE(u.f[i], 0.0);
    ASSERT_LT(u.f[i], 1.0);
    EXPECT_EQ(u.f[i] * 16777216.0, std::floor(u.f[i] * 16777216.0)); // on the 2^-24 grid
    sum += u.f[i];
    below += u.f[i] < 0.1;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);  // sd of the mean: 0.0009
  EXPECT_NEAR(below / n, 0.1, 0.005); // sd: 0.00095
  for (auto [k0, k1] : {std::pair<int32_t, int32_t>{20261207, -4}, {20261208, -5}}) {
    HostTensor v = draws(k0, k1);
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i)
      same += v.f[i] == u.f[i];
    EXPECT_LT(same, 50) << "keys differing in one word give unrelated draws";
  }
}
