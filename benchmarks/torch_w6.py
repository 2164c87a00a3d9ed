# PyTorch's W6 rows alone (the seeds' LSTM-128: in 128, hidden 128, batch 128, 64 steps, linear
# head; f32 with TF32 allowed), as torch_best.py times them (cuDNN eager, torch.compile with CUDA
# graphs; forward and an SGD-momentum step; CUDA-event medians of 50 runs), for runs that measure
# only W6 (scripts/gpu-run.sh w6). Prints one line a setting.
import time
import torch, torch.nn as nn, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True

from torch_timing import bench

def rec(name, key, fn):
    t0 = time.time(); fn(); torch.cuda.synchronize(); first = time.time() - t0
    print(f"{name} PyTorch {key:24s} {bench(fn):8.4f} ms  (first call {first:5.1f} s)", flush=True)

class LSTMNet(nn.Module):
    def __init__(s):
        super().__init__(); s.lstm = nn.LSTM(128, 128, batch_first=True); s.fc = nn.Linear(128, 10)
    def forward(s, x):
        out, _ = s.lstm(x); return s.fc(out[:, -1])
net = LSTMNet().cuda(); xs = torch.randn(128, 64, 128, device="cuda"); ys = torch.randint(0, 10, (128,), device="cuda")
with torch.no_grad():
    rec("W6", "eager_cudnn", lambda: net(xs))
    cn = torch.compile(net, mode="reduce-overhead")
    rec("W6", "compile_reduce_overhead", lambda: cn(xs))
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, fused=True)
def step(model=net):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(xs), ys)
    loss.backward(); opt.step()
rec("W6step", "eager_cudnn", step)
cstep_model = torch.compile(net, mode="reduce-overhead")
rec("W6step", "compile_reduce_overhead", lambda: step(cstep_model))
