# PyTorch's W5 step (ResNet-18, 32x32, batch 256, SGD momentum, channels_last, f32/TF32), built as
# ../shared/device/torch_best.py builds it, for Nsight Compute's per-kernel durations: the setting
# (argv[1]: eager_fused_sgd, compile or compile_reduce_overhead; default the last, PyTorch's best)
# is warmed up (compiled), then `steps` (argv[2], default 3) steps run between cudaProfilerStart
# and cudaProfilerStop, so `ncu --profile-from-start off` sees those steps' kernels alone
# (scripts/gpu-run.sh ncu-torch-w5; benchmarks/ncu-kernel-table.py folds them). A diagnostic.
import sys
import torch, torch.nn.functional as F
import torchvision

torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
key = sys.argv[1] if len(sys.argv) > 1 else "compile_reduce_overhead"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
dev = "cuda"
rn = torchvision.models.resnet18(num_classes=10).to(dev).to(memory_format=torch.channels_last)
xi = torch.randn(256, 3, 32, 32, device=dev).to(memory_format=torch.channels_last)
yi = torch.randint(0, 10, (256,), device=dev)
model = {"eager_fused_sgd": rn, "compile": torch.compile(rn),
         "compile_reduce_overhead": torch.compile(rn, mode="reduce-overhead")}[key]
opt = torch.optim.SGD(rn.parameters(), lr=0.1, momentum=0.9, fused=True)

def step():
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(xi), yi)
    loss.backward(); opt.step()

for _ in range(20):
    step()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for _ in range(steps):
    step()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print(f"W5 {key}: {steps} steps profiled", flush=True)
