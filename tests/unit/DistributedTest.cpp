// Data-parallel training's pieces that run without a GPU: the TCP rendezvous (rank 0's payload to
// every rank; the ranks missing named on a timeout), the process group's refusals on the CPU, and
// a training step with its gradients all-reduced (world size 1) equal to the plain step, with
// the bucket of all-reduces in its plan. NCCL itself runs in tests/gpu (GpuTest.cpp).
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/ProcessGroup.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <random>

using namespace rfuse;

namespace {

// A free port, as the system hands one out (bound to port 0, read, released): tests that ctest
// runs side by side in other processes get other ports.
int freshPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && ::bind(fd, (sockaddr *)&a, sizeof a) == 0 && ::getsockname(fd, (sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    ::close(fd);
  return port ? port : 29600 + (int)(std::random_device{}() % 2000);
}

ProcessGroupOptions rank(int r, int world, int port, double timeout = 10) {
  ProcessGroupOptions o;
  o.rank = r;
  o.worldSize = world;
  o.masterPort = port;
  o.timeoutSeconds = timeout;
  o.device = Device::Cpu;
  return o;
}

TEST(Distributed, RendezvousHandsRankZerosPayloadToEveryRank) {
  int port = freshPort();
  std::string id(128, '\0');
  for (int i = 0; i < 128; ++i)
    id[i] = (char)(i * 7 + 1);
  std::vector<std::future<std::string>> ranks;
  for (int r = 3; r >= 1; --r) // joiners first: they retry until rank 0 listens
    ranks.push_back(std::async(std::launch::async, [=] { return rendezvous(rank(r, 4, port), ""); }));
  EXPECT_EQ(rendezvous(rank(0, 4, port), id), id);
  for (auto &f : ranks)
    EXPECT_EQ(f.get(), id);
}

TEST(Distributed, RendezvousNamesTheRanksThatDidNotJoin) {
  int port = freshPort();
  auto one = std::async(std::launch::async, [=] { return rendezvous(rank(1, 4, port), ""); });
  try {
    rendezvous(rank(0, 4, port, 1.0), "id");
    FAIL() << "expected a timeout";
  } catch (const DistributedError &e) {
    EXPECT_NE(std::string(e.what()).find("ranks 2, 3 of 4 did not join"), std::string::npos) << e.what();
  }
  EXPECT_THROW(one.get(), DistributedError); // rank 0 left without handing out the id
}

TEST(Distributed, RendezvousWithoutRankZeroTimesOutNamingTheAddress) {
  int port = freshPort();
  try {
    rendezvous(rank(2, 3, port, 0.5), "");
    FAIL() << "expected a timeout";
  } catch (const DistributedError &e) {
    EXPECT_NE(std::string(e.what()).find("rank 2: no rank 0 answered at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
  }
}

TEST(Distributed, RendezvousRefusesAMismatchedWorldSize) {
  int port = freshPort();
  auto other = std::async(std::launch::async, [=] {
    try {
      rendezvous(rank(1, 3, port, 2), "");
    } catch (const DistributedError &) {
    }
  });
  try {
    rendezvous(rank(0, 2, port, 5), "id");
    FAIL() << "expected a refusal";
  } catch (const DistributedError &e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 was started with world size 3, rank 0 with 2"), std::string::npos)
        << e.what();
  }
  other.get();
}

TEST(Distributed, BadGroupOptionsAreRefused) {
  EXPECT_THROW(initProcessGroup(rank(2, 2, 29500)), DistributedError);
  EXPECT_THROW(initProcessGroup(rank(0, 0, 29500)), DistributedError);
  ProcessGroupOptions port = rank(0, 1, 70000);
  EXPECT_THROW(initProcessGroup(port), DistributedError);
  try {
    initProcessGroup(rank(0, 2, freshPort()));
    FAIL() << "a CPU group of two ranks";
  } catch (const DistributedError &e) {
    EXPECT_NE(std::string(e.what()).find("a process group on the CPU has one rank"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(processGroupInfo().active);
}

// loss = mean((x w + b)^2 - y)^2 over a batch, SGD with momentum: the step with its gradients
// averaged over a group of one equals the plain step, exactly, and its plan all-reduces both
// gradients in one bucket.
TEST(Distributed, AllReducedStepOfOneRankEqualsThePlainStep) {
  GraphBuilder g;
  TracedValue x = g.input({8, 5}, DType::F64), w = g.input({5, 3}, DType::F64), b = g.input({3}, DType::F64);
  TracedValue h = g.tanh(g.add(g.matmul(x, w), g.broadcastTo(b, {8, 3})));
  g.finish({g.reduceMean(g.mul(h, h), {0, 1})});
  std::mt19937_64 rng(5);
  std::vector<HostTensor> in = {test::randomTensor(DType::F64, {8, 5}, rng), test::randomTensor(DType::F64, {5, 3}, rng),
                                test::randomTensor(DType::F64, {3}, rng), HostTensor(DType::F64, {5, 3}),
                                HostTensor(DType::F64, {3})};
  GradientRequest plain;
  plain.wrt = {1, 2};
  plain.optimizer = "sgd";
  plain.learningRate = 0.1;
  plain.momentum = 0.9;
  GradientRequest ddp = plain;
  ddp.gradientAllReduce = "mean";
  auto p = compileGradientProgram(g.moduleText(), "default", plain);
  auto d = compileGradientProgram(g.moduleText(), "default", ddp);
  initProcessGroup(rank(0, 1, freshPort()));
  ProcessGroupInfo info = processGroupInfo();
  EXPECT_TRUE(info.active);
  EXPECT_EQ(info.worldSize, 1);
  std::vector<HostTensor> a = p->run(in, Device::Cpu), c = d->run(in, Device::Cpu);
  destroyProcessGroup();
  EXPECT_FALSE(processGroupInfo().active);
  ASSERT_EQ(a.size(), c.size());
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(a[k].f, c[k].f) << "output " << k;
  size_t collectives = 0;
  for (const std::string &line : d->cpuSteps())
    collectives += line.find("all-reduce (mean) of 2 tensors") != std::string::npos;
  EXPECT_EQ(collectives, 1u);
  for (const std::string &line : p->cpuSteps())
    EXPECT_EQ(line.find("all-reduce"), std::string::npos) << line;
}

// Two ranks emulated on the CPU: each runs the all-reduced SGD step (momentum, weight decay) on
// its half of the batch, and "NCCL" (here: the test) averages what the step all-reduces — the
// updated parameters — while each rank keeps its own momentum buffers. After three steps the
// parameters equal plain SGD on the whole batch: the algebra the SGD step's parameter averaging
// relies on, in f64.
TEST(Distributed, ParameterAveragingOfSgdEqualsGradientAveraging) {
  auto program = [](int64_t rows, bool ddp) {
    GraphBuilder g;
    TracedValue x = g.input({rows, 5}, DType::F64), w = g.input({5, 3}, DType::F64), b = g.input({3}, DType::F64);
    TracedValue h = g.tanh(g.add(g.matmul(x, w), g.broadcastTo(b, {rows, 3})));
    g.finish({g.reduceMean(g.mul(h, h), {0, 1})});
    GradientRequest r;
    r.wrt = {1, 2};
    r.optimizer = "sgd";
    r.learningRate = 0.2;
    r.momentum = 0.9;
    r.weightDecay = 0.01;
    if (ddp)
      r.gradientAllReduce = "mean";
    return compileGradientProgram(g.moduleText(), "default", r);
  };
  auto whole = program(8, false), half = program(4, true);
  std::mt19937_64 rng(17);
  HostTensor x = test::randomTensor(DType::F64, {8, 5}, rng);
  HostTensor x0(DType::F64, {4, 5}), x1(DType::F64, {4, 5});
  for (int64_t i = 0; i < 20; ++i) { // rows 0-3 and 4-7 (row-major)
    x0.f[i] = x.f[i];
    x1.f[i] = x.f[20 + i];
  }
  std::vector<HostTensor> p = {test::randomTensor(DType::F64, {5, 3}, rng), test::randomTensor(DType::F64, {3}, rng)};
  std::vector<HostTensor> ref = p, v = {HostTensor(DType::F64, {5, 3}), HostTensor(DType::F64, {3})};
  std::vector<std::vector<HostTensor>> vr = {v, v};
  for (int step = 0; step < 3; ++step) {
    auto full = whole->run({x, ref[0], ref[1], v[0], v[1]}, Device::Cpu);
    ref = {full[1], full[2]};
    v = {full[3], full[4]};
    auto r0 = half->run({x0, p[0], p[1], vr[0][0], vr[0][1]}, Device::Cpu);
    auto r1 = half->run({x1, p[0], p[1], vr[1][0], vr[1][1]}, Device::Cpu);
    for (size_t k = 0; k < 2; ++k)
      for (size_t e = 0; e < p[k].f.size(); ++e)
        p[k].f[e] = 0.5 * (r0[1 + k].f[e] + r1[1 + k].f[e]);
    vr = {{r0[3], r0[4]}, {r1[3], r1[4]}};
  }
  for (size_t k = 0; k < 2; ++k)
    EXPECT_LE(test::maxRelError(p[k].f, ref[k].f, 1e-12), 1e-12) << "parameter " << k;
}

} // namespace
