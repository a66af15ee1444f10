#!/usr/bin/env python3
"""torch_gpt.py: a small GPT trained in plain PyTorch (no Megatron), for checking the
DHelix shim under a real framework (scripts/gpu-validate runs it without the shim and
with LD_PRELOAD=libdhelix_shim.so in passthrough, profile and plan mode).

    torch_gpt.py [--steps N] [--device cuda|cpu] [--dry-run] [--out FILE]

Deterministic by construction, so that runs can be compared bit for bit: fp32 with TF32
off, torch.use_deterministic_algorithms(True), CUBLAS_WORKSPACE_CONFIG=:4096:8, fixed seeds
and data, attention written out (no fused attention kernels), AdamW. Each step accumulates
gradients over --micro-batches micro-batches (forward on this thread, backward on
autograd's device thread: the two strands the shim pairs) and reads the loss once
(.item(), one host synchronisation per step, as a training loop that logs does).

Prints one JSON object (also written to --out): the device, the losses (float.hex, every
bit, and as numbers), the SHA-256 of every final parameter's bytes in named_parameters()
order, and step times (CUDA events on a GPU), mean over the steps after --warmup. With
--nccl (GPU only) a one-rank NCCL process group all-reduces the gradients each step, as
DDP would, so that the run reaches NCCL too.

--dry-run: two steps on the CPU, twice, and checks that the two runs agree bit for bit and
that the output is well formed (exit 0 when it is, 1 when not). Without torch it says so
and exits 0 (the caller checks the syntax with `python3 -m py_compile`).

The environment is set before torch is imported: CUBLAS_WORKSPACE_CONFIG, and
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync unless set (the shim reorders only with
the stream-ordered allocator).
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync")


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the mean step time")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--dry-run", action="store_true", help="2 CPU steps, twice; check the script works")
    p.add_argument("--out", help="also write the JSON here")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--micro-batches", type=int, default=4)
    p.add_argument("--mbs", type=int, default=8, help="sequences per micro-batch")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--nccl", action="store_true",
                   help="a one-rank NCCL process group; gradients all-reduced each step (as DDP)")
    return p.parse_args()


def build(torch, a):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(a.hidden)
            self.qkv = nn.Linear(a.hidden, 3 * a.hidden)
            self.proj = nn.Linear(a.hidden, a.hidden)
            self.ln2 = nn.LayerNorm(a.hidden)
            self.fc1 = nn.Linear(a.hidden, 4 * a.hidden)
            self.fc2 = nn.Linear(4 * a.hidden, a.hidden)

        def attn(self, x, mask):
            b, s, h = x.shape
            d = h // a.heads
            q, k, v = self.qkv(x).split(h, dim=2)
            q, k, v = (t.view(b, s, a.heads, d).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            return self.proj((att @ v).transpose(1, 2).reshape(b, s, h))

        def forward(self, x, mask):
            x = x + self.attn(self.ln1(x), mask)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(a.vocab, a.hidden)
            self.pos = nn.Embedding(a.seq, a.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(a.layers))
            self.ln = nn.LayerNorm(a.hidden)
            self.head = nn.Linear(a.hidden, a.vocab, bias=False)
            self.register_buffer("mask", torch.ones(a.seq, a.seq, dtype=torch.bool).triu(1), persistent=False)

        def forward(self, idx, targets):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x, self.mask)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.reshape(-1, a.vocab), targets.reshape(-1))

    return GPT()


def param_sha256(torch, model):
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        t = p.detach().to("cpu").contiguous()
        h.update(name.encode())
        try:
            h.update(t.numpy().tobytes())
        except Exception:  # torch without numpy: slower, same bytes
            h.update(bytes(t.view(-1).view(torch.uint8).tolist()))
    return h.hexdigest()


def nccl_group(torch):
    """One-rank ProcessGroupNCCL, rendezvous through a file (no network needed)."""
    import tempfile
    import torch.distributed as dist
    store = os.path.join(tempfile.mkdtemp(prefix="torch_gpt."), "store")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="file://" + store, world_size=1, rank=0)
    return dist


def train(torch, a, device):
    dist = nccl_group(torch) if a.nccl and device == "cuda" else None
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    model = build(torch, a).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(a.seed + 1)
    shape = (a.steps, a.micro_batches, a.mbs, a.seq + 1)
    data = torch.randint(0, a.vocab, shape, generator=gen).to(device)
    cuda = device == "cuda"
    losses, times = [], []
    for step in range(a.steps):
        if cuda:
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
        else:
            w0 = time.perf_counter()
        total = torch.zeros((), device=device)
        for mb in range(a.micro_batches):
            seq = data[step, mb]
            loss = model(seq[:, :-1], seq[:, 1:]) / a.micro_batches
            loss.backward()
            total += loss.detach()
        if dist:
            for p in model.parameters():
                dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            t1.record()
        losses.append(total.item())
        if cuda:
            t1.synchronize()
            times.append(t0.elapsed_time(t1))
        else:
            times.append((time.perf_counter() - w0) * 1e3)
    timed = times[a.warmup:] if len(times) > a.warmup else times
    sha = param_sha256(torch, model)
    if dist:
        dist.destroy_process_group()
    return {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "steps": a.steps,
        "micro_batches": a.micro_batches,
        "params": sum(p.numel() for p in model.parameters()),
        "losses_hex": [float(x).hex() for x in losses],
        "losses": losses,
        "param_sha256": sha,
        "nccl": dist is not None,
        "torch_cuda": torch.version.cuda,
        "step_ms": times,
        "mean_step_ms": sum(timed) / len(timed),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    }


def emit(res, out):
    text = json.dumps(res)
    print(text, flush=True)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def main():
    a = parse()
    try:
        import torch
    except ImportError as e:
        if a.dry_run:
            print("torch_gpt: torch is not installed here (%s); dry run skipped, "
                  "check the syntax with python3 -m py_compile" % e)
            return 0
        print("torch_gpt: torch is not installed: %s" % e, file=sys.stderr)
        return 2
    if a.dry_run:
        a.steps, a.warmup = 2, 0
        r1, r2 = train(torch, a, "cpu"), train(torch, a, "cpu")
        bad = []
        if r1["losses_hex"] != r2["losses_hex"] or r1["param_sha256"] != r2["param_sha256"]:
            bad.append("two CPU runs differ: %s vs %s" % (r1["losses_hex"], r2["losses_hex"]))
        if len(r1["losses"]) != 2 or not all(math.isfinite(x) for x in r1["losses"]):
            bad.append("losses not 2 finite values: %s" % r1["losses"])
        r1["dry_run"] = True
        r1["dry_run_ok"] = not bad
        emit(r1, a.out)
        for b in bad:
            print("torch_gpt: dry run: " + b, file=sys.stderr)
        return 1 if bad else 0
    if a.device == "cuda" and not torch.cuda.is_available():
        print("torch_gpt: no CUDA device visible to torch", file=sys.stderr)
        return 2
    emit(train(torch, a, a.device), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
