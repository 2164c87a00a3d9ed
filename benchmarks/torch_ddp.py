# PyTorch DistributedDataParallel on the data-parallel workloads (issue 19), the peer of
# benchmarks/r-ddp-bench.R: W5 ResNet-18 (32x32, batch 256 per GPU, SGD momentum, channels_last,
# TF32) and W2 MLP (4096 per GPU, 1024-4096-4096-1024, GELU, SGD), eager with cudnn.benchmark and
# fused SGD, and torch.compile over the DDP module. One process per GPU, NCCL:
#   torchrun --standalone --nproc_per_node=N benchmarks/torch_ddp.py
# Rank 0 writes $OUT/torch_ddp_<N>.json (median step ms from CUDA events, samples per second) and
# prints one line per case. NVLink multicast stays off (NCCL_NVLS_ENABLE=0 on these machines).
import json, os, time
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
OUT = os.environ.get("OUT", ".")
res = {"torch": torch.__version__, "world_size": world}

def median_step_ms(step, iters=30, warm=5):
    for _ in range(warm): step()
    torch.cuda.synchronize(); dist.barrier(); ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); step(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    t = torch.tensor(sorted(ts)[len(ts) // 2], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX) # the slowest rank sets the pace
    return t.item()

def case(name, key, make, batch):
    try:
        step = make()
        t0 = time.time(); step(); torch.cuda.synchronize(); first = time.time() - t0
        ms = median_step_ms(step)
        res.setdefault(name, {})[key] = {"step_ms": ms, "samples_per_s": world * batch / ms * 1000, "first_s": round(first, 1)}
        if rank == 0:
            print(f"{name:4s} {key:16s} world {world}: {ms:8.3f} ms/step  {world * batch / ms * 1000:10.0f} samples/s", flush=True)
    except Exception as ex:
        res.setdefault(name, {})[key] = None
        if rank == 0:
            print(f"{name:4s} {key:16s} FAILED {type(ex).__name__}: {str(ex)[:160]}", flush=True)

def trainer(model, x, y, loss_fn, lr, momentum, compiled):
    net = DDP(model, device_ids=[local])
    fwd = torch.compile(net) if compiled else net
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum, fused=True)
    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(fwd(x), y).backward()
        opt.step()
    return step

torch.manual_seed(rank)
for key, compiled in (("eager_fused_sgd", False), ("compile", True)):
    import torchvision
    def w5():
        rn = torchvision.models.resnet18(num_classes=10).to(dev).to(memory_format=torch.channels_last)
        xi = torch.randn(256, 3, 32, 32, device=dev).to(memory_format=torch.channels_last)
        yi = torch.randint(0, 10, (256,), device=dev)
        return trainer(rn, xi, yi, F.cross_entropy, 0.1, 0.9, compiled)
    case("W5", key, w5, 256)
    def w2():
        mlp = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(dev)
        X = torch.randn(4096, 1024, device=dev); Y = torch.randn(4096, 1024, device=dev)
        return trainer(mlp, X, Y, F.mse_loss, 1e-3, 0.0, compiled)
    case("W2", key, w2, 4096)
if rank == 0:
    json.dump(res, open(os.path.join(OUT, f"torch_ddp_{world}.json"), "w"), indent=1)
dist.destroy_process_group()
