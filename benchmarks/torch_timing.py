# The timing every PyTorch side script here uses, as ../shared/device/torch_best.py times: CUDA
# events around each call after `warm` warm-up calls, the median of `iters`.
import torch

def bench(fn, iters=50, warm=5):
    for _ in range(warm): fn()
    torch.cuda.synchronize(); ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts) // 2]
