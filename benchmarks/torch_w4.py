# PyTorch's W4 rows alone (layer norm + GELU + residual, 8192x4096 f32), as torch_best.py times
# them (eager, torch.compile, torch.compile with CUDA graphs; CUDA-event medians of 50 runs), for
# runs that measure only W4 (scripts/gpu-run.sh column-cache). Prints one line a setting.
import time
import torch, torch.nn.functional as F

from torch_timing import bench

xl = torch.randn(8192, 4096, device="cuda"); g = torch.randn(4096, device="cuda"); bb = torch.randn(4096, device="cuda")
def w4(): return F.gelu(F.layer_norm(xl, (4096,), g, bb)) * 1.5 + xl
for key, fn in [("eager", w4), ("compile", torch.compile(w4)),
                ("compile_reduce_overhead", torch.compile(w4, mode="reduce-overhead"))]:
    t0 = time.time(); fn(); torch.cuda.synchronize()
    print(f"W4 PyTorch {key:24s} {bench(fn):8.4f} ms  (first call {time.time() - t0:5.1f} s)", flush=True)
