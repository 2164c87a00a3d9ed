// One compiled program for every batch size (see BatchTemplate in Engine.h).
//
// Two modules of one traced function at batch sizes bA != bB are compared op for op (names,
// operand wiring, attributes, regions). Each value's type is either the same in both or a ranked
// tensor whose differing dims are c * batch (the same c in both, no offset): that per-value
// pattern is what the batch size changes. A module for size C is the first one with those dims
// set to c * C. The traced module at C must have the same pattern against the traced module at
// bA, so code that depends on the size some other way (an R branch on nrow(x), a constant
// 1 / nrow(x)) is never specialized: it compiles a program of its own.
//
// Kernels: the plan at C is built as any plan; each generated CUDA source is compared token by
// token with the ones at bA and bB. Integer literals that differ must be one affine function of
// the batch size at all three (c * B + d); they become that expression of a new last kernel
// parameter `rf_batch`, so every size launches one compiled kernel. A kernel whose sources differ
// in any other way keeps its own source for C (compiled for that size: correct, just not shared).
#include "rfuse/Runtime/Engine.h"
#include "ProgramState.h"

#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

using namespace mlir;

namespace rfuse {

namespace {

// A value's dims as the batch size changes them: empty when its type never changes, else one
// entry per dim, 0 for a fixed dim and c for c * batch.
using DimPattern = std::vector<int64_t>;

struct Walked {
  std::vector<Operation *> ops;
  std::vector<Value> values; // results and block arguments, in walk order
  llvm::DenseMap<Value, size_t> id;
};

Walked walk(ModuleOp m) {
  Walked w;
  m->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == m.getOperation())
      return;
    w.ops.push_back(op);
    for (Value r : op->getResults()) {
      w.id[r] = w.values.size();
      w.values.push_back(r);
    }
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument a : block.getArguments()) {
          w.id[a] = w.values.size();
          w.values.push_back(a);
        }
  });
  return w;
}

std::string typeText(Type t) { return printed(t); }

std::string opText(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << op->getName().getStringRef() << "' at ";
  op->getLoc().print(os);
  return os.str();
}

// The pattern of types ta (at batch ba) and tb (at bb); nullopt with `why` when they differ in
// another way than a dim that is the same multiple of the batch in both.
std::optional<DimPattern> typePattern(Type ta, int64_t ba, Type tb, int64_t bb, std::string &why) {
  if (ta == tb)
    return DimPattern{};
  auto ra = llvm::dyn_cast<RankedTensorType>(ta), rb = llvm::dyn_cast<RankedTensorType>(tb);
  if (!ra || !rb || ra.getElementType() != rb.getElementType() || ra.getRank() != rb.getRank()) {
    why = "types " + typeText(ta) + " and " + typeText(tb) + " differ in more than their sizes";
    return std::nullopt;
  }
  DimPattern p(ra.getRank(), 0);
  for (int64_t d = 0; d < ra.getRank(); ++d) {
    int64_t x = ra.getDimSize(d), y = rb.getDimSize(d);
    if (x == y)
      continue;
    if (x <= 0 || y <= 0 || x % ba != 0 || y % bb != 0 || x / ba != y / bb) {
      why = "a dimension that is not a multiple of the batch size (" + typeText(ta) + " at batch " +
            std::to_string(ba) + ", " + typeText(tb) + " at batch " + std::to_string(bb) + ")";
      return std::nullopt;
    }
    p[d] = x / ba;
  }
  return p;
}

bool isSplat(Attribute a) {
  auto d = llvm::dyn_cast<DenseElementsAttr>(a);
  return d && d.isSplat();
}

// The two modules' patterns (one per value of `a`'s walk), or nullopt with `why`.
std::optional<std::vector<DimPattern>> compareModules(ModuleOp a, int64_t ba, ModuleOp b, int64_t bb,
                                                      std::string &why) {
  Walked wa = walk(a), wb = walk(b);
  if (wa.ops.size() != wb.ops.size() || wa.values.size() != wb.values.size()) {
    why = "the programs have different ops (" + std::to_string(wa.ops.size()) + " and " +
          std::to_string(wb.ops.size()) + ")";
    return std::nullopt;
  }
  std::vector<DimPattern> patterns(wa.values.size());
  for (size_t v = 0; v < wa.values.size(); ++v) {
    auto p = typePattern(wa.values[v].getType(), ba, wb.values[v].getType(), bb, why);
    if (!p)
      return std::nullopt;
    patterns[v] = *p;
  }
  for (size_t i = 0; i < wa.ops.size(); ++i) {
    Operation *x = wa.ops[i], *y = wb.ops[i];
    auto differ = [&](const std::string &what) {
      why = opText(x) + " and " + opText(y) + ": " + what;
      return std::nullopt;
    };
    if (x->getName() != y->getName())
      return differ("different ops");
    if (x->getNumOperands() != y->getNumOperands() || x->getNumResults() != y->getNumResults() ||
        x->getNumRegions() != y->getNumRegions() || x->getNumSuccessors() != y->getNumSuccessors())
      return differ("different operand, result or region counts");
    for (unsigned k = 0; k < x->getNumOperands(); ++k) {
      auto ix = wa.id.find(x->getOperand(k)), iy = wb.id.find(y->getOperand(k));
      if (ix == wa.id.end() || iy == wb.id.end() || ix->second != iy->second)
        return differ("different operands");
    }
    for (unsigned r = 0; r < x->getNumRegions(); ++r)
      if (x->getRegion(r).getBlocks().size() != y->getRegion(r).getBlocks().size())
        return differ("different blocks");
    DictionaryAttr dx = x->getAttrDictionary(), dy = y->getAttrDictionary();
    if (dx.size() != dy.size())
      return differ("different attributes");
    for (auto [nx, ny] : llvm::zip(dx.getValue(), dy.getValue())) {
      if (nx.getName() != ny.getName())
        return differ("different attributes");
      Attribute ax = nx.getValue(), ay = ny.getValue();
      if (ax == ay)
        continue;
      // A splat constant of a batch-sized type: the same value, the op's result type.
      if (isSplat(ax) && isSplat(ay) && x->getNumResults() == 1 &&
          llvm::cast<DenseElementsAttr>(ax).getType() == x->getResult(0).getType() &&
          llvm::cast<DenseElementsAttr>(ay).getType() == y->getResult(0).getType() &&
          llvm::cast<DenseElementsAttr>(ax).getSplatValue<Attribute>() ==
              llvm::cast<DenseElementsAttr>(ay).getSplatValue<Attribute>())
        continue;
      // A function's type: its body's argument and result types, compared as values.
      if (isa<func::FuncOp>(x) && nx.getName() == "function_type" && !cast<func::FuncOp>(x).isExternal())
        continue;
      return differ("attribute '" + nx.getName().str() + "' differs");
    }
  }
  // Results of functions: the returned values' patterns (through func.return operands, above).
  return patterns;
}

// Sets each value of `m` (walked as the template's first module) to its type at `batch`.
void applyPatterns(ModuleOp m, const std::vector<DimPattern> &patterns, int64_t batch) {
  Walked w = walk(m);
  for (size_t v = 0; v < w.values.size(); ++v) {
    if (patterns[v].empty())
      continue;
    auto t = llvm::cast<RankedTensorType>(w.values[v].getType());
    SmallVector<int64_t> shape(t.getShape());
    for (size_t d = 0; d < shape.size(); ++d)
      if (patterns[v][d])
        shape[d] = patterns[v][d] * batch;
    w.values[v].setType(RankedTensorType::get(shape, t.getElementType(), t.getEncoding()));
  }
  for (Operation *op : w.ops) {
    if (op->getNumResults() == 1)
      for (NamedAttribute na : op->getAttrs())
        if (auto d = llvm::dyn_cast<DenseElementsAttr>(na.getValue());
            d && d.isSplat() && d.getType() != op->getResult(0).getType() &&
            llvm::isa<ShapedType>(op->getResult(0).getType()))
          op->setAttr(na.getName(), DenseElementsAttr::get(llvm::cast<ShapedType>(op->getResult(0).getType()),
                                                           d.getSplatValue<Attribute>()));
    if (auto f = dyn_cast<func::FuncOp>(op); f && !f.isExternal()) {
      Block &body = f.getBody().front();
      SmallVector<Type> results(body.getTerminator()->getOperandTypes());
      f.setFunctionType(FunctionType::get(m.getContext(), body.getArgumentTypes(), results));
    }
  }
}

// ---- Kernel sources ---------------------------------------------------------------------------

struct Token {
  std::string text;
  bool number = false;  // a C preprocessing number
  bool comment = false; // a // comment to the end of the line
};

std::vector<Token> tokenize(const std::string &s) {
  std::vector<Token> out;
  size_t i = 0, n = s.size();
  auto identChar = [](char c) { return std::isalnum((unsigned char)c) || c == '_'; };
  while (i < n) {
    size_t j = i;
    Token t;
    if (s.compare(i, 2, "//") == 0) {
      j = s.find('\n', i);
      j = j == std::string::npos ? n : j;
      t.comment = true;
    } else if (std::isdigit((unsigned char)s[i]) || (s[i] == '.' && i + 1 < n && std::isdigit((unsigned char)s[i + 1]))) {
      t.number = true;
      ++j;
      while (j < n && (identChar(s[j]) || s[j] == '.' ||
                       ((s[j] == '+' || s[j] == '-') && std::strchr("eEpP", s[j - 1]))))
        ++j;
    } else if (identChar(s[i])) {
      while (j < n && identChar(s[j]))
        ++j;
    } else {
      ++j;
    }
    t.text = s.substr(i, j - i);
    out.push_back(std::move(t));
    i = j;
  }
  return out;
}

// A decimal integer literal, optionally with an LL suffix.
std::optional<int64_t> integerLiteral(const std::string &t) {
  size_t end = t.size();
  if (end > 2 && t.compare(end - 2, 2, "LL") == 0)
    end -= 2;
  if (end == 0 || end > 18)
    return std::nullopt;
  for (size_t k = 0; k < end; ++k)
    if (!std::isdigit((unsigned char)t[k]))
      return std::nullopt;
  return std::stoll(t.substr(0, end));
}

struct Affine {
  int64_t c = 0, d = 0;
};

// The affine function of the batch through (ba, x), (bb, y), checked at (bc, z).
std::optional<Affine> fit(int64_t ba, int64_t x, int64_t bb, int64_t y, int64_t bc, int64_t z) {
  if ((y - x) % (bb - ba) != 0)
    return std::nullopt;
  Affine f{(y - x) / (bb - ba), 0};
  f.d = x - f.c * ba;
  if (f.c * bc + f.d != z)
    return std::nullopt;
  return f;
}

std::string expression(Affine f, bool comment) {
  if (comment)
    return (f.c == 1 ? std::string("B") : std::to_string(f.c) + "*B") +
           (f.d ? (f.d > 0 ? "+" : "-") + std::to_string(std::llabs(f.d)) : "");
  std::string e = f.c == 1 ? "rf_batch" : std::to_string(f.c) + "LL * rf_batch";
  if (f.d)
    e += (f.d > 0 ? " + " : " - ") + std::to_string(std::llabs(f.d)) + "LL";
  return f.c == 1 && f.d == 0 ? e : "(" + e + ")";
}

const Token *neighbour(const std::vector<Token> &t, size_t i, int step) {
  for (long k = (long)i + step; k >= 0 && k < (long)t.size(); k += step)
    if (!t[k].comment && !std::isspace((unsigned char)t[k].text[0]))
      return &t[k];
  return nullptr;
}

// The tokens of three sources (at batches ba, bb, bc) as one source in rf_batch; nullopt when
// they differ in anything but integer literals that are one affine function of the batch in
// places an expression may stand (not an array bound, not a template argument). `changed` says
// whether any literal depends on the batch.
std::optional<std::string> liftTokens(const std::vector<Token> &a, int64_t ba, const std::vector<Token> &b,
                                      int64_t bb, const std::vector<Token> &c, int64_t bc, bool inComment,
                                      bool &changed) {
  if (a.size() != b.size() || a.size() != c.size())
    return std::nullopt;
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].text == b[i].text && a[i].text == c[i].text) {
      out += a[i].text;
      continue;
    }
    if (a[i].comment && b[i].comment && c[i].comment) {
      bool unused = false;
      auto lifted = liftTokens(tokenize(a[i].text.substr(2)), ba, tokenize(b[i].text.substr(2)), bb,
                               tokenize(c[i].text.substr(2)), bc, true, unused);
      out += "//" + (lifted ? *lifted : a[i].text.substr(2) + " (at batch " + std::to_string(ba) + ")");
      continue;
    }
    auto x = integerLiteral(a[i].text), y = integerLiteral(b[i].text), z = integerLiteral(c[i].text);
    if (!x || !y || !z)
      return std::nullopt;
    auto f = fit(ba, *x, bb, *y, bc, *z);
    if (!f)
      return std::nullopt;
    if (!inComment) {
      const Token *before = neighbour(a, i, -1), *after = neighbour(a, i, +1);
      static const std::string operators = "(+-*/%<=,?:>";
      if (!before || before->text.size() != 1 || operators.find(before->text[0]) == std::string::npos ||
          (after && after->text == ">") || (after && after->text == "]"))
        return std::nullopt;
      changed = true;
    }
    out += expression(*f, inComment);
  }
  return out;
}

// Adds `long long rf_batch` as the last parameter of kernel `name` in `source`.
std::optional<std::string> addBatchParameter(const std::string &source, const std::string &name) {
  size_t global = source.find("__global__ void");
  if (global == std::string::npos)
    return std::nullopt;
  size_t open = source.find(" " + name + "(", global);
  if (open == std::string::npos)
    return std::nullopt;
  open += name.size() + 1;
  size_t close = source.find(')', open);
  if (close == std::string::npos)
    return std::nullopt;
  bool empty = source.find_first_not_of(" \n", open + 1) == close;
  return source.substr(0, close) + (empty ? "long long rf_batch" : ", long long rf_batch") + source.substr(close);
}

std::string printWithLocations(ModuleOp m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, OpPrintingFlags().enableDebugInfo(/*enable=*/true, /*prettyForm=*/false));
  return os.str();
}

} // namespace

struct BatchTemplate::Impl {
  std::string tracedText;           // the traced module at batchA
  std::vector<DimPattern> traced;   // its values' patterns
  std::string compiledText;         // the compiled module at batchA (with locations)
  std::vector<DimPattern> compiled; // its values' patterns
  std::string pipeline, entry;
  Tf32 tf32 = Tf32::FromOptions;
  uint64_t kernelCount = 0, bytesMoved = 0;
  // The GPU plans' kernels at batchA and batchB, per step (empty: no kernel).
  std::vector<std::string> kernelsA, kernelsB, namesA;
};

BatchTemplate::~BatchTemplate() = default;

namespace {
std::vector<std::string> planKernels(const codegen::ExecutionPlan &p, std::vector<std::string> *names = nullptr) {
  std::vector<std::string> k;
  for (const codegen::Step &s : p.steps) {
    k.push_back(s.cudaKernel ? s.cudaKernel->source : "");
    if (names)
      names->push_back(s.cudaKernel ? s.cudaKernel->name : "");
  }
  return k;
}

// Two modules parsed into one context (types and attributes compare by identity within one).
struct ParsedPair {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> a, b;
  explicit ParsedPair(DialectRegistry &r) : ctx(r) {}
};

std::unique_ptr<ParsedPair> parsePair(const std::string &a, const std::string &b, std::string &why) {
  DialectRegistry registry;
  registerRfuseDialects(registry);
  auto p = std::make_unique<ParsedPair>(registry);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&p->ctx, [&](Diagnostic &d) {
    llvm::raw_string_ostream(diagnostics) << d << "\n";
    return success();
  });
  p->a = parseSourceString<ModuleOp>(a, &p->ctx);
  p->b = parseSourceString<ModuleOp>(b, &p->ctx);
  if (!p->a || !p->b) {
    why = "a module does not parse: " + diagnostics;
    return nullptr;
  }
  return p;
}
} // namespace

std::shared_ptr<BatchTemplate> BatchTemplate::make(const Program &a, int64_t batchA, const Program &b,
                                                   int64_t batchB, std::string &why) {
  if (batchA == batchB || batchA < 1 || batchB < 1) {
    why = "two different positive batch sizes are needed";
    return nullptr;
  }
  if (a.entry_ != b.entry_ || a.info_.pipeline != b.info_.pipeline || a.state_->tf32 != b.state_->tf32) {
    why = "the programs were compiled differently";
    return nullptr;
  }
  // The traced modules and the compiled ones, each pair parsed into one context.
  auto patterns = [&](const std::string &x, const std::string &y, const char *what) -> std::optional<std::vector<DimPattern>> {
    auto pair = parsePair(x, y, why);
    auto p = pair ? compareModules(*pair->a, batchA, *pair->b, batchB, why) : std::nullopt;
    if (pair && !p)
      why = std::string("the ") + what + " programs differ: " + why;
    return p;
  };
  auto traced = patterns(a.info_.tracedText, b.info_.tracedText, "traced");
  if (!traced)
    return nullptr;
  std::string compiledText = printWithLocations(a.state_->module.get());
  auto compiled = patterns(compiledText, printWithLocations(b.state_->module.get()), "compiled");
  if (!compiled)
    return nullptr;
  std::shared_ptr<BatchTemplate> t(new BatchTemplate());
  t->batchA_ = batchA;
  t->batchB_ = batchB;
  t->impl_ = std::make_unique<Impl>();
  Impl &im = *t->impl_;
  im.tracedText = a.info_.tracedText;
  im.traced = std::move(*traced);
  im.compiledText = std::move(compiledText);
  im.compiled = std::move(*compiled);
  im.pipeline = a.info_.pipeline;
  im.entry = a.entry_;
  im.tf32 = a.state_->tf32;
  im.kernelCount = a.info_.kernelCount;
  im.bytesMoved = a.info_.bytesMoved;
  im.kernelsA = planKernels(*a.state_->cudaPlan, &im.namesA);
  im.kernelsB = planKernels(*b.state_->cudaPlan);
  return t;
}

std::shared_ptr<Program> BatchTemplate::specialize(const std::string &tracedText, int64_t batch,
                                                   std::string &why) const {
  auto start = std::chrono::steady_clock::now();
  const Impl &im = *impl_;
  if (batch < 1) {
    why = "the batch size must be positive";
    return nullptr;
  }
  {
    auto pair = parsePair(im.tracedText, tracedText, why);
    if (!pair)
      return nullptr;
    auto p = compareModules(*pair->a, batchA_, *pair->b, batch, why);
    if (!p) {
      why = "the trace at batch " + std::to_string(batch) + " differs: " + why;
      return nullptr;
    }
    // (at the template's own size every type is the same: the trace must be the template's)
    bool matches = batch == batchA_ ? llvm::all_of(*p, [](const DimPattern &d) { return d.empty(); }) : *p == im.traced;
    if (!matches) {
      why = "the trace at batch " + std::to_string(batch) + " depends on the batch size in another way";
      return nullptr;
    }
  }
  DialectRegistry registry;
  registerRfuseDialects(registry);
  std::shared_ptr<Program> program(new Program());
  program->state_ = std::make_unique<Program::State>(registry);
  program->state_->tf32 = im.tf32;
  program->entry_ = im.entry;
  MLIRContext &ctx = program->state_->ctx;
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d.getLocation() << ": " << d << "\n";
    return success();
  });
  program->state_->module = parseSourceString<ModuleOp>(im.compiledText, &ctx);
  if (!program->state_->module)
    throw CompileError("the batch template's module does not parse:\n" + diagnostics);
  applyPatterns(program->state_->module.get(), im.compiled, batch);
  if (failed(verify(program->state_->module.get())))
    throw CompileError("the program specialized for batch " + std::to_string(batch) + " does not verify:\n" +
                       diagnostics);
  CompileInfo &info = program->info_;
  info.pipeline = im.pipeline;
  info.tracedText = tracedText;
  info.kernelCount = im.kernelCount;
  info.bytesMoved = im.bytesMoved;
  program->planAndDescribe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  // One kernel source for every size where the sources at the three sizes allow it.
  codegen::ExecutionPlan &plan = *program->state_->cudaPlan;
  if (plan.steps.size() == im.kernelsA.size()) {
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      auto &k = plan.steps[i].cudaKernel;
      if (!k || im.kernelsA[i].empty() || im.kernelsB[i].empty() || k->name != im.namesA[i])
        continue;
      bool changed = false;
      auto lifted = liftTokens(tokenize(im.kernelsA[i]), batchA_, tokenize(im.kernelsB[i]), batchB_,
                               tokenize(k->source), batch, false, changed);
      if (!lifted)
        continue;
      if (changed) {
        auto withParameter = addBatchParameter(*lifted, k->name);
        if (!withParameter)
          continue;
        lifted = withParameter;
        k->takesBatch = true;
        k->batch = batch;
      }
      for (auto &[label, source] : info.cudaSources)
        if (label == plan.steps[i].label && source == k->source)
          source = *lifted;
      k->source = *lifted;
    }
  }
  countSpecialization();
  return program;
}

} // namespace rfuse
