# PyTorch baselines that ../shared/device/torch_baselines*.py do not cover, same method (CUDA
# events, median): W5, the ResNet-18 training step, in f32 with TF32 (PyTorch's default for
# convolutions; matmuls allowed as in torch_baselines2.py), channels_last, SGD momentum 0.9.
import json, os, time
import torch, torch.nn.functional as F, torchvision
torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
dev = "cuda"; res = {}
from torch_timing import bench as bench_median
def bench(fn, iters=30, warm=5): return bench_median(fn, iters, warm)
rn = torchvision.models.resnet18(num_classes=10).to(dev).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(rn.parameters(), lr=0.1, momentum=0.9)
xi = torch.randn(256, 3, 32, 32, device=dev).to(memory_format=torch.channels_last)
yi = torch.randint(0, 10, (256,), device=dev)
def step(model):
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(xi), yi).backward(); opt.step()
res["W5_resnet18_step_f32"] = {"eager_ms": bench(lambda: step(rn))}
print("W5 resnet18 f32 eager", res["W5_resnet18_step_f32"]["eager_ms"], flush=True)
crn = torch.compile(rn)
t0 = time.time(); step(crn); torch.cuda.synchronize(); ct = time.time() - t0
res["W5_resnet18_step_f32"].update(compiled_ms=bench(lambda: step(crn)), compile_s=ct)
print("W5 resnet18 f32 compiled", res["W5_resnet18_step_f32"]["compiled_ms"], ct, flush=True)
out = os.environ.get("OUT", "."); json.dump(res, open(os.path.join(out, "torch_extra.json"), "w"), indent=1)
