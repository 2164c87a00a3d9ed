# PyTorch's W7 bf16 step with the encoder layer's default dropout (0.1: attention, feed-forward and
# residual dropout), beside the same step with dropout 0 as torch_best.py runs it: W7 (pre-norm,
# d 512, 8 heads, ff 2048, GELU, batch 32, seq 256), AdamW (fused), bf16 autocast; eager (SDPA's
# fused kernels, with dropout inside them), torch.compile, and torch.compile with CUDA graphs.
# CUDA-event medians of 30 runs (torch_best.py's timing). For scripts/gpu-run.sh w7drop; prints
# one line a setting. RFUSE_TORCH_SETTINGS (comma-separated: eager, compile,
# compile_reduce_overhead) picks settings, RFUSE_TORCH_ROWS (W7drop, W7bf16) the rows; default all.
import os, time
import torch, torch.nn as nn, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True

from torch_timing import bench

def rec(name, key, fn):
    t0 = time.time(); fn(); torch.cuda.synchronize(); first = time.time() - t0
    print(f"{name} PyTorch {key:24s} {bench(fn, 30):8.4f} ms  (first call {first:5.1f} s)", flush=True)

settings = os.environ.get("RFUSE_TORCH_SETTINGS", "eager,compile,compile_reduce_overhead").split(",")
xt = torch.randn(32, 256, 512, device="cuda"); yt = torch.randn(32, 256, 512, device="cuda")
rows = os.environ.get("RFUSE_TORCH_ROWS", "W7drop,W7bf16").split(",")
for name, p in (("W7drop", 0.1), ("W7bf16", 0.0)):
    if name not in rows:
        continue
    layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=p, batch_first=True, norm_first=True,
                                       activation="gelu").cuda()
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    def step(model=layer):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(model(xt), yt)
        loss.backward(); opt.step()
    if "eager" in settings:
        rec(name, "eager", step)
    if "compile" in settings:
        cl = torch.compile(layer)
        rec(name, "compile", lambda: step(cl))
    if "compile_reduce_overhead" in settings:
        clr = torch.compile(layer, mode="reduce-overhead")
        rec(name, "compile_reduce_overhead", lambda: step(clr))
