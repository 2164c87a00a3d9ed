// The cache key of a jitted call: readable, and different for different signatures even when
// names imitate the key's own separators.
#include "rfuse/Frontend/CallKey.h"

#include <gtest/gtest.h>

using namespace rfuse;

namespace {
ArgSignature value(std::string name, std::string type, int64_t length) {
  ArgSignature a;
  a.name = std::move(name);
  a.type = std::move(type);
  a.length = length;
  return a;
}
} // namespace

TEST(CallKey, ReadsAsTheSignature) {
  ArgSignature t;
  t.kind = ArgSignature::Kind::Tensor;
  t.name = "w";
  t.type = "float32@cuda";
  t.hasDims = true;
  t.dims = {2, 3};
  ArgSignature s;
  s.kind = ArgSignature::Kind::Static;
  s.name = "training";
  EXPECT_EQ(callKey({value("x", "double", 3), t, s}), "x:double[3];w:float32@cuda{d2x3};training=?;");
}

TEST(CallKey, NamesThatImitateSeparatorsDoNotCollide) {
  // One argument named "x:double[3];y" against two arguments x and y.
  std::string one = callKey({value("x:double[3];y", "double", 2)});
  std::string two = callKey({value("x", "double", 3), value("y", "double", 2)});
  EXPECT_NE(one, two);
  ArgSignature st;
  st.kind = ArgSignature::Kind::Static;
  st.name = "x";
  EXPECT_NE(callKey({value("x=?;y", "double", 1)}), callKey({st, value("y", "double", 1)}));
  // A vector, a 1-d array and a tensor of the same length; a value whose type looks like a tensor's.
  ArgSignature arr = value("x", "double", 0);
  arr.hasDims = true;
  arr.dims = {3};
  ArgSignature ten = value("x", "double", 3);
  ten.kind = ArgSignature::Kind::Tensor;
  EXPECT_NE(callKey({value("x", "double", 3)}), callKey({arr}));
  EXPECT_NE(callKey({value("x", "double", 3)}), callKey({ten}));
  EXPECT_NE(callKey({value("x", "double{3}", 3)}), callKey({ten}));
}
