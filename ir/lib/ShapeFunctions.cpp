#include "rfuse/IR/ShapeFunctions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using llvm::ArrayRef;

namespace rfuse {

std::string shapeToString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, ", ");
  os << "]";
  return os.str();
}

namespace {
// Formats a message with llvm::raw_string_ostream; returns false so callers can `return fail(...)`.
template <class... Ts> bool fail(std::string &err, const Ts &...parts) {
  err.clear();
  llvm::raw_string_ostream os(err);
  (os << ... << parts);
  return false;
}

bool checkDimList(ArrayRef<int64_t> dims, int64_t rank, const char *what, std::string &err) {
  llvm::SmallVector<bool, 8> seen(rank, false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank)
      return fail(err, what, " ", d, " is out of range for an operand of rank ", rank);
    if (seen[d])
      return fail(err, what, " ", d, " appears twice");
    seen[d] = true;
  }
  return true;
}

bool checkPair(ArrayRef<int64_t> v, const char *name, std::string &err, int64_t minValue) {
  if (v.size() != 2)
    return fail(err, name, " must have 2 values, got ", v.size());
  for (int64_t x : v)
    if (x < minValue)
      return fail(err, name, " values must be >= ", minValue, ", got ", shapeToString(v));
  return true;
}

bool checkPadding(ArrayRef<int64_t> padding, std::string &err) {
  if (padding.size() != 4)
    return fail(err, "padding must have 4 values [top, bottom, left, right], got ",
                padding.size());
  for (int64_t p : padding)
    if (p < 0)
      return fail(err, "padding must be non-negative, got ", shapeToString(padding));
  return true;
}
} // namespace

bool inferTransposeShape(ArrayRef<int64_t> in, ArrayRef<int64_t> perm, Shape &out,
                         std::string &err) {
  if ((int64_t)perm.size() != (int64_t)in.size())
    return fail(err, "perm has ", perm.size(), " entries but the operand has rank ", in.size());
  if (!checkDimList(perm, in.size(), "perm entry", err))
    return false;
  out.clear();
  for (int64_t p : perm)
    out.push_back(in[p]);
  return true;
}

bool inferReduceShape(ArrayRef<int64_t> in, ArrayRef<int64_t> dims, bool keepDims, Shape &out,
                      std::string &err) {
  if (!checkDimList(dims, in.size(), "reduction dimension", err))
    return false;
  out.clear();
  for (int64_t i = 0, e = in.size(); i < e; ++i) {
    if (llvm::is_contained(dims, i)) {
      if (keepDims)
        out.push_back(1);
    } else {
      out.push_back(in[i]);
    }
  }
  return true;
}

bool inferMatmulShape(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs, bool transposeA,
                      bool transposeB, Shape &out, std::string &err) {
  if (lhs.size() < 2 || lhs.size() > 3)
    return fail(err, "lhs must have rank 2 or 3, got shape ", shapeToString(lhs));
  if (rhs.size() < 2 || rhs.size() > 3)
    return fail(err, "rhs must have rank 2 or 3, got shape ", shapeToString(rhs));
  size_t lr = lhs.size(), rr = rhs.size();
  int64_t m = transposeA ? lhs[lr - 1] : lhs[lr - 2];
  int64_t kl = transposeA ? lhs[lr - 2] : lhs[lr - 1];
  int64_t kr = transposeB ? rhs[rr - 1] : rhs[rr - 2];
  int64_t n = transposeB ? rhs[rr - 2] : rhs[rr - 1];
  if (kl != kr)
    return fail(err, "non-conformable arguments: lhs ", shapeToString(lhs),
                transposeA ? " (transposed)" : "", " has ", kl, " columns but rhs ",
                shapeToString(rhs), transposeB ? " (transposed)" : "", " has ", kr, " rows");
  out.clear();
  if (lr == 3 && rr == 3) {
    if (lhs[0] != rhs[0])
      return fail(err, "batch sizes differ: lhs ", lhs[0], ", rhs ", rhs[0]);
    out.push_back(lhs[0]);
  } else if (lr == 3) {
    out.push_back(lhs[0]);
  } else if (rr == 3) {
    out.push_back(rhs[0]);
  }
  out.push_back(m);
  out.push_back(n);
  return true;
}

bool inferConv2dShape(ArrayRef<int64_t> in, ArrayRef<int64_t> filter,
                      std::optional<ArrayRef<int64_t>> bias, ArrayRef<int64_t> strides,
                      ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation, int64_t groups,
                      bool nhwc, Shape &out, std::string &err) {
  if (in.size() != 4)
    return fail(err, "input must have rank 4 (", nhwc ? "NHWC" : "NCHW", "), got shape ",
                shapeToString(in));
  if (filter.size() != 4)
    return fail(err, "filter must have rank 4 (", nhwc ? "OHWI" : "OIHW", "), got shape ",
                shapeToString(filter));
  if (!checkPair(strides, "strides", err, 1) || !checkPair(dilation, "dilation", err, 1) ||
      !checkPadding(padding, err))
    return false;
  if (groups < 1)
    return fail(err, "groups must be >= 1, got ", groups);
  int64_t n = in[0], c = nhwc ? in[3] : in[1], h = nhwc ? in[1] : in[2], w = nhwc ? in[2] : in[3];
  int64_t o = filter[0], ci = nhwc ? filter[3] : filter[1], kh = nhwc ? filter[1] : filter[2],
          kw = nhwc ? filter[2] : filter[3];
  if (kh < 1 || kw < 1)
    return fail(err, "filter spatial size must be at least 1x1, got ", kh, "x", kw);
  if (c % groups != 0 || o % groups != 0)
    return fail(err, "input channels (", c, ") and output channels (", o,
                ") must be divisible by groups (", groups, ")");
  if (ci * groups != c)
    return fail(err, "filter expects ", ci, " input channels per group, but the input has ", c,
                " channels in ", groups, " group(s)");
  if (bias && (bias->size() != 1 || (*bias)[0] != o))
    return fail(err, "bias must have shape [", o, "], got ", shapeToString(*bias));
  int64_t effH = dilation[0] * (kh - 1) + 1, effW = dilation[1] * (kw - 1) + 1;
  int64_t ph = h + padding[0] + padding[1], pw = w + padding[2] + padding[3];
  if (ph < effH || pw < effW)
    return fail(err, "the dilated kernel (", effH, "x", effW, ") is larger than the padded input (",
                ph, "x", pw, ")");
  int64_t oh = (ph - effH) / strides[0] + 1, ow = (pw - effW) / strides[1] + 1;
  out.assign(nhwc ? Shape{n, oh, ow, o} : Shape{n, o, oh, ow});
  return true;
}

bool inferPool2dShape(ArrayRef<int64_t> in, ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                      ArrayRef<int64_t> padding, bool nhwc, Shape &out, std::string &err) {
  if (in.size() != 4)
    return fail(err, "input must have rank 4 (", nhwc ? "NHWC" : "NCHW", "), got shape ",
                shapeToString(in));
  if (!checkPair(kernel, "kernel", err, 1) || !checkPair(strides, "strides", err, 1) ||
      !checkPadding(padding, err))
    return false;
  if (padding[0] >= kernel[0] || padding[1] >= kernel[0] || padding[2] >= kernel[1] ||
      padding[3] >= kernel[1])
    return fail(err, "padding ", shapeToString(padding), " must be smaller than the kernel ",
                shapeToString(kernel));
  int64_t n = in[0], c = nhwc ? in[3] : in[1], h = nhwc ? in[1] : in[2], w = nhwc ? in[2] : in[3];
  int64_t ph = h + padding[0] + padding[1], pw = w + padding[2] + padding[3];
  if (ph < kernel[0] || pw < kernel[1])
    return fail(err, "the kernel ", shapeToString(kernel), " is larger than the padded input (",
                ph, "x", pw, ")");
  int64_t oh = (ph - kernel[0]) / strides[0] + 1, ow = (pw - kernel[1]) / strides[1] + 1;
  out.assign(nhwc ? Shape{n, oh, ow, c} : Shape{n, c, oh, ow});
  return true;
}

bool checkBroadcastInDim(ArrayRef<int64_t> in, ArrayRef<int64_t> dims, ArrayRef<int64_t> out,
                         std::string &err) {
  if (dims.size() != in.size())
    return fail(err, "dims has ", dims.size(), " entries but the operand has rank ", in.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= (int64_t)out.size())
      return fail(err, "dims[", i, "] = ", dims[i], " is out of range for a result of rank ",
                  out.size());
    if (i > 0 && dims[i] <= dims[i - 1])
      return fail(err, "dims must be strictly increasing, got ", shapeToString(dims));
    if (in[i] != 1 && in[i] != out[dims[i]])
      return fail(err, "operand dimension ", i, " (size ", in[i], ") cannot be broadcast to result "
                  "dimension ", dims[i], " (size ", out[dims[i]], ")");
  }
  return true;
}

bool checkReshape(ArrayRef<int64_t> in, ArrayRef<int64_t> out, std::string &err) {
  // Element counts in int64: a zero dimension makes any shape empty; otherwise overflow means 2^63
  // or more elements, which no tensor here can have.
  auto count = [](ArrayRef<int64_t> shape, int64_t &n) {
    n = 1;
    if (llvm::is_contained(shape, 0)) {
      n = 0;
      return true;
    }
    for (int64_t d : shape)
      if (__builtin_mul_overflow(n, d, &n))
        return false;
    return true;
  };
  int64_t a, b;
  if (!count(in, a))
    return fail(err, "operand shape ", shapeToString(in), " has more than 2^63 - 1 elements");
  if (!count(out, b))
    return fail(err, "result shape ", shapeToString(out), " has more than 2^63 - 1 elements");
  if (a != b)
    return fail(err, "cannot reshape ", shapeToString(in), " (", a, " elements) to ",
                shapeToString(out), " (", b, " elements)");
  return true;
}

bool inferSliceShape(ArrayRef<int64_t> in, ArrayRef<int64_t> start, ArrayRef<int64_t> limit,
                     ArrayRef<int64_t> strides, Shape &out, std::string &err) {
  if (start.size() != in.size() || limit.size() != in.size() || strides.size() != in.size())
    return fail(err, "start, limit and strides need one entry per operand dimension (", in.size(),
                "), got ", start.size(), ", ", limit.size(), " and ", strides.size());
  out.clear();
  for (size_t d = 0; d < in.size(); ++d) {
    if (strides[d] < 1)
      return fail(err, "strides must be >= 1, got ", shapeToString(strides));
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > in[d])
      return fail(err, "dimension ", d, ": the range [", start[d], ", ", limit[d],
                  ") does not lie within [0, ", in[d], "]");
    out.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  }
  return true;
}

bool inferPadShape(ArrayRef<int64_t> in, ArrayRef<int64_t> low, ArrayRef<int64_t> high,
                   ArrayRef<int64_t> interior, Shape &out, std::string &err) {
  if (low.size() != in.size() || high.size() != in.size() || interior.size() != in.size())
    return fail(err, "low, high and interior need one entry per operand dimension (", in.size(),
                "), got ", low.size(), ", ", high.size(), " and ", interior.size());
  out.clear();
  for (size_t d = 0; d < in.size(); ++d) {
    if (low[d] < 0 || high[d] < 0 || interior[d] < 0)
      return fail(err, "padding must be non-negative, got low ", shapeToString(low), ", high ",
                  shapeToString(high), ", interior ", shapeToString(interior));
    out.push_back(low[d] + high[d] + (in[d] == 0 ? 0 : in[d] + (in[d] - 1) * interior[d]));
  }
  return true;
}

bool inferConcatShape(ArrayRef<llvm::SmallVector<int64_t, 4>> ins, int64_t dim, Shape &out,
                      std::string &err) {
  if (ins.empty())
    return fail(err, "needs at least one operand");
  size_t rank = ins[0].size();
  if (dim < 0 || dim >= (int64_t)rank)
    return fail(err, "dim ", dim, " is out of range for operands of rank ", rank);
  out.assign(ins[0].begin(), ins[0].end());
  out[dim] = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].size() != rank)
      return fail(err, "operand ", i, " has rank ", ins[i].size(), ", operand 0 rank ", rank);
    for (size_t d = 0; d < rank; ++d)
      if ((int64_t)d != dim && ins[i][d] != ins[0][d])
        return fail(err, "operand ", i, " has shape ", shapeToString(ins[i]), ", which differs from operand 0's ",
                    shapeToString(ins[0]), " outside dim ", dim);
    out[dim] += ins[i][dim];
  }
  return true;
}

bool inferGatherShape(ArrayRef<int64_t> in, ArrayRef<int64_t> indices, int64_t dim, Shape &out,
                      std::string &err) {
  if (dim < 0 || dim >= (int64_t)in.size())
    return fail(err, "dim ", dim, " is out of range for an operand of rank ", in.size());
  if (indices.size() != 1)
    return fail(err, "indices must be a vector, got shape ", shapeToString(indices));
  if (in[dim] == 0 && indices[0] > 0)
    return fail(err, "indices select from an empty dimension ", dim);
  out.assign(in.begin(), in.end());
  out[dim] = indices[0];
  return true;
}

bool checkReverseDims(ArrayRef<int64_t> in, ArrayRef<int64_t> dims, std::string &err) {
  return checkDimList(dims, in.size(), "reversed dimension", err);
}

bool broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b, Shape &out, std::string &err) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return fail(err, "shapes ", shapeToString(a), " and ", shapeToString(b),
                  " are not broadcast-compatible (", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return true;
}

} // namespace rfuse
