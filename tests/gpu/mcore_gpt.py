#!/usr/bin/env python3
"""mcore_gpt.py: a small GPT built and trained with Megatron-Core's own code, for checking
the DHelix shim under the framework our users run (scripts/gpu-validate runs it without the
shim and with LD_PRELOAD=libdhelix_shim.so in passthrough, profile and plan mode).

    mcore_gpt.py [--steps N] [--device cuda|cpu] [--optimizer megatron|torch] [--out FILE]
    mcore_gpt.py --check          the CPU check (two short runs on the CPU, gloo; exit 77
                                  when torch or megatron-core is not importable)
    mcore_gpt.py --self-test      the script's own logic without torch (argument parsing,
                                  result records, the comparison); no Megatron needed

What it builds, with the API of megatron-core 0.19 (NVIDIA/Megatron-LM, tag core_v0.19.0;
the carried wheel is 0.19.2, scripts/gpu-wheels):
- torch.distributed over one rank (NCCL on a GPU, gloo on the CPU), then
  parallel_state.initialize_model_parallel(1, 1): TP = PP = 1
  (megatron/core/parallel_state.py);
- model_parallel_cuda_manual_seed(seed) (megatron/core/tensor_parallel/random.py);
- GPTModel(config, get_gpt_layer_local_spec(), vocab, seq) (megatron/core/models/gpt/
  gpt_model.py, gpt_layer_specs.py): Megatron-Core's local layers, not Transformer Engine;
- TransformerConfig with every fusion off and no dropout, fp32, so that the run is
  deterministic and its kernels are PyTorch's and cuBLAS's, which the shim sees;
- with --optimizer megatron (the default on a GPU): Megatron's DistributedDataParallel
  (megatron/core/distributed/distributed_data_parallel.py; its contiguous gradient buffer
  and its data-parallel all-reduce, over NCCL) and get_megatron_optimizer
  (megatron/core/optimizer/__init__.py, Adam with gradient clipping), with
  finalize_model_grads as the schedule's finalize function; with --optimizer torch: the
  bare model, torch.optim.AdamW, and the gradients all-reduced by hand;
- each step: get_forward_backward_func() -> forward_backward_no_pipelining
  (megatron/core/pipeline_parallel/schedules.py) over --micro-batches micro-batches of
  gradient accumulation (forward on this thread, backward on autograd's device thread: the
  two strands the shim pairs), then the optimizer step. The losses are read once a step.

The environment is set before torch is imported: PYTORCH_CUDA_ALLOC_CONF=backend:
cudaMallocAsync (the stream-ordered allocator the shim needs to reorder) unless set,
CUBLAS_WORKSPACE_CONFIG=:4096:8, TORCHDYNAMO_DISABLE=1; then
torch.use_deterministic_algorithms(True, warn_only).

Prints one JSON object (also written to --out), in the shape of tests/gpu/torch_gpt.py's
(scripts/gpu-validate compares both with tests/gpu/gv.py `same torch`): losses (float.hex),
the SHA-256 of the final parameters, step times, the versions.

On the CPU (--device cpu, --check) Megatron-Core's code runs unchanged, but a few of its
calls name the GPU outright (torch.cuda.current_device() as a device, device="cuda" in the
schedule's token counter, the CUDA RNG tracker): the CPU run points those at the CPU
(cpu_redirect below). The GPU run patches nothing.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync")
# Megatron decorates a few helpers with torch.compile (megatron/core/jit.py); none is on this
# configuration's path, and one that were would compile for minutes in every run of a
# budgeted GPU session: eager instead.
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

SKIP = 77


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the mean step time")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--optimizer", choices=["megatron", "torch"], default=None,
                   help="megatron: Megatron's DDP and optimizer (default on cuda); torch: AdamW")
    p.add_argument("--check", action="store_true", help="the CPU check: 2 steps, twice, compared")
    p.add_argument("--self-test", action="store_true", help="the script's logic without torch")
    p.add_argument("--out", help="also write the JSON here")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--micro-batches", type=int, default=4)
    p.add_argument("--mbs", type=int, default=4, help="sequences per micro-batch")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--clip-grad", type=float, default=None,
                   help="Megatron's gradient clipping (default 1.0 on cuda; 0 on the CPU, where "
                        "clip_grads.py asserts CUDA tensors)")
    a = p.parse_args(argv)
    if a.check:
        a.device = "cpu"
    if a.optimizer is None:
        a.optimizer = "megatron"
    if a.clip_grad is None:
        a.clip_grad = 1.0 if a.device == "cuda" else 0.0
    if a.steps < 1 or a.micro_batches < 1 or a.hidden % a.heads:
        p.error("need --steps >= 1, --micro-batches >= 1 and --hidden divisible by --heads")
    return a


def cpu_redirect(torch):
    """Points Megatron-Core's explicit GPU references at the CPU, for the CPU check only.
    Megatron allocates with device=torch.cuda.current_device() and, in the schedule,
    device="cuda"; the factories below map a CUDA device to the CPU. Nothing else changes:
    the model, the layers, the schedule and the optimizer are Megatron's code."""
    def host(dev):
        if dev is None:
            return dev
        if isinstance(dev, int) or str(dev).startswith("cuda"):
            return torch.device("cpu")
        return dev

    def wrap(fn):
        def f(*args, **kw):
            if "device" in kw:
                kw["device"] = host(kw["device"])
            return fn(*args, **kw)
        return f

    for name in ("zeros", "ones", "empty", "full", "tensor", "arange", "zeros_like", "empty_like",
                 "ones_like", "randn", "rand"):
        setattr(torch, name, wrap(getattr(torch, name)))
    torch.cuda.current_device = lambda: torch.device("cpu")

    class HostStream:
        """The CPU's one in-order "stream": waits and synchronisations have nothing to do."""
        def wait_event(self, event):
            pass

        def wait_stream(self, stream):
            pass

        def synchronize(self):
            pass
    torch.cuda.current_stream = lambda device=None: HostStream()
    torch.cuda.synchronize = lambda device=None: None
    to = torch.Tensor.to

    def tensor_to(self, *args, **kw):
        args = tuple(host(x) if isinstance(x, (str, torch.device)) and str(x).startswith("cuda") else x
                     for x in args)
        if "device" in kw:
            kw["device"] = host(kw["device"])
        return to(self, *args, **kw)
    torch.Tensor.to = tensor_to
    torch.Tensor.cuda = lambda self, *a, **k: self


def init_parallel(torch, a):
    """One rank of torch.distributed, then Megatron's parallel state with TP = PP = 1."""
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    store = os.path.join(tempfile.mkdtemp(prefix="mcore_gpt."), "store")
    if a.device == "cuda":
        torch.cuda.set_device(0)
    dist.init_process_group("nccl" if a.device == "cuda" else "gloo", init_method="file://" + store,
                            world_size=1, rank=0)
    # megatron/core/parallel_state.py: initialize_model_parallel(tensor_model_parallel_size,
    # pipeline_model_parallel_size, ...); its gloo groups serve the distributed optimizer,
    # which this run does not use.
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                             create_gloo_process_groups=False)
    # On the CPU the CUDA RNG tracker cannot hold CUDA generator states; the inference
    # tracker keeps the interface and forks nothing (there is no dropout to seed here).
    model_parallel_cuda_manual_seed(a.seed, inference_rng_tracker=(a.device == "cpu"))
    return dist, parallel_state


def build(torch, a):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    # Fusions off: they are jit/torch.compile'd kernels (minutes of compilation per run on
    # a GPU, and different code on the CPU); dropout off: nothing random after the init.
    config = TransformerConfig(
        num_layers=a.layers, hidden_size=a.hidden, num_attention_heads=a.heads,
        ffn_hidden_size=4 * a.hidden, hidden_dropout=0.0, attention_dropout=0.0,
        bias_activation_fusion=False, bias_dropout_fusion=False, masked_softmax_fusion=False,
        apply_rope_fusion=False, gradient_accumulation_fusion=False, persist_layer_norm=False,
        cross_entropy_loss_fusion=False, params_dtype=torch.float32, pipeline_dtype=torch.float32,
        use_cpu_initialization=(a.device == "cpu"), init_method_std=0.02)
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=a.vocab,
                     max_sequence_length=a.seq, position_embedding_type="learned_absolute")
    return config, model.to(a.device)


def wrap_megatron(torch, a, config, model):
    """Megatron's DDP and optimizer, as pretrain_gpt.py sets them up for TP = PP = DP = 1."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.distributed.finalize_model_grads import finalize_model_grads
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

    ddp = DistributedDataParallel(config=config, module=model,
                                  ddp_config=DistributedDataParallelConfig(
                                      grad_reduce_in_fp32=True, overlap_grad_reduce=False,
                                      use_distributed_optimizer=False))
    opt = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=a.lr, weight_decay=0.01,
                                                 clip_grad=a.clip_grad, params_dtype=torch.float32),
                                 [ddp], use_gloo_process_groups=False)
    config.finalize_model_grads_func = finalize_model_grads
    config.no_sync_func = ddp.no_sync
    return ddp, opt


def make_batches(torch, a):
    gen = torch.Generator().manual_seed(a.seed + 1)
    data = torch.randint(0, a.vocab, (a.steps, a.micro_batches, a.mbs, a.seq + 1), generator=gen)
    return data.to(a.device)


def mcore_version():
    """The installed distribution's version (megatron.core.__version__ appends the git hash
    of the current directory, which is this project's, not Megatron's)."""
    try:
        from importlib.metadata import version
        return version("megatron-core")
    except Exception:  # not installed as a distribution (PYTHONPATH to a source tree)
        import megatron.core as mc
        return getattr(mc, "__version__", "?")


def param_sha256(torch, model):
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        h.update(name.encode())
        h.update(p.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def train(torch, a):
    torch.manual_seed(a.seed)
    # warn_only: an op without a deterministic CUDA kernel must not end a scarce GPU run
    # before it reports; the bit-for-bit comparison of the runs is the judge.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dist, parallel_state = init_parallel(torch, a)
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func

    config, model = build(torch, a)
    if a.optimizer == "megatron":
        ddp, opt = wrap_megatron(torch, a, config, model)
    else:
        ddp, opt = model, torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    data = make_batches(torch, a)
    positions = torch.arange(a.seq, device=a.device).unsqueeze(0).expand(a.mbs, -1)
    # Megatron's masks say True where attention is NOT allowed (the causal upper triangle).
    mask = torch.ones(a.seq, a.seq, dtype=torch.bool, device=a.device).triu(1).view(1, 1, a.seq, a.seq)
    forward_backward = get_forward_backward_func()
    cuda = a.device == "cuda"
    losses, times = [], []
    for step in range(a.steps):
        micro = iter(data[step])

        def forward_step(it, m):
            seq = next(it)
            out = m(seq[:, :-1], positions, mask, labels=seq[:, 1:])  # per-token losses [b, s]

            def loss_func(t):
                loss = t.float().mean()
                # A copy: the schedule divides the returned loss in place by the number
                # of micro-batches (forward_step_calc_loss), and a detached view would
                # follow it.
                return loss, {"lm loss": loss.detach().clone()}
            return out, loss_func

        if cuda:
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
        else:
            w0 = time.perf_counter()
        if a.optimizer == "megatron":
            ddp.zero_grad_buffer()
        opt.zero_grad()
        reduced = forward_backward(forward_step_func=forward_step, data_iterator=micro, model=ddp,
                                   num_microbatches=a.micro_batches, seq_length=a.seq,
                                   micro_batch_size=a.mbs, forward_only=False)
        if a.optimizer == "megatron":
            opt.step()
        else:
            for p in model.parameters():
                dist.all_reduce(p.grad)
            opt.step()
        if cuda:
            t1.record()
        # One host synchronisation a step, as a training loop that logs its loss makes.
        step_loss = torch.stack([r["lm loss"] for r in reduced]).sum() / a.micro_batches
        losses.append(step_loss.item())
        if cuda:
            t1.synchronize()
            times.append(t0.elapsed_time(t1))
        else:
            times.append((time.perf_counter() - w0) * 1e3)
    timed = times[a.warmup:] if len(times) > a.warmup else times
    res = {
        "framework": "megatron-core",
        "megatron_core": mcore_version(),
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "optimizer": a.optimizer, "steps": a.steps, "micro_batches": a.micro_batches,
        "params": sum(p.numel() for p in model.parameters()),
        "losses_hex": [float(x).hex() for x in losses], "losses": losses,
        "param_sha256": param_sha256(torch, model),
        "nccl": dist.get_backend() == "nccl",
        "step_ms": times, "mean_step_ms": sum(timed) / len(timed),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    }
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
    return res


def compare(r1, r2):
    """What makes two runs' records differ, [] when they are bit-identical and well formed."""
    bad = []
    if not r1.get("losses_hex") or r1.get("losses_hex") != r2.get("losses_hex"):
        bad.append("losses differ: %s vs %s" % (r1.get("losses_hex"), r2.get("losses_hex")))
    if r1.get("param_sha256") != r2.get("param_sha256"):
        bad.append("final parameters differ: %s vs %s" % (r1.get("param_sha256"), r2.get("param_sha256")))
    for r in (r1, r2):
        ls = r.get("losses", [])
        if len(ls) != r.get("steps") or not all(isinstance(x, float) and math.isfinite(x) for x in ls):
            bad.append("losses not %s finite values: %s" % (r.get("steps"), ls))
    return bad


def self_test():
    """The logic that does not need torch: parsing and the comparison must be able to fail."""
    bad = []
    a = parse(["--check"])
    if (a.device, a.clip_grad) != ("cpu", 0.0):
        bad.append("--check: device %s clip %s, expected cpu 0.0" % (a.device, a.clip_grad))
    a = parse([])
    if (a.device, a.optimizer, a.clip_grad) != ("cuda", "megatron", 1.0):
        bad.append("defaults: device %s optimizer %s clip %s, expected cuda megatron 1.0" % (
            a.device, a.optimizer, a.clip_grad))
    r = {"steps": 2, "losses": [6.9, 6.8], "losses_hex": [(6.9).hex(), (6.8).hex()], "param_sha256": "ab"}
    if compare(r, dict(r)):
        bad.append("identical records compared different: %s" % compare(r, dict(r)))
    for change in ({"losses_hex": [(6.9).hex(), (6.7).hex()]}, {"param_sha256": "ac"},
                   {"losses": [6.9, float("nan")]}, {"losses": [6.9]}):
        if not compare(r, dict(r, **change)):
            bad.append("a change went unseen: %s" % change)
    for b in bad:
        print("mcore_gpt: self-test: " + b, file=sys.stderr)
    print("mcore_gpt: self-test %s" % ("FAILED" if bad else "passed"))
    return 1 if bad else 0


def emit(res, out):
    text = json.dumps(res)
    print(text, flush=True)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def check(torch, a):
    """The CPU check: Megatron's optimizer path twice (must agree bit for bit) and the bare
    model with AdamW once (its first loss, computed before any update, must equal the
    other path's: Megatron's DDP wrapper must not change the forward)."""
    a.steps, a.warmup = 2, 0
    a.layers, a.hidden, a.heads, a.seq, a.vocab, a.mbs = 2, 64, 4, 32, 128, 2
    a.optimizer = "megatron"
    r1 = train(torch, a)
    r2 = train(torch, a)
    a.optimizer = "torch"
    r3 = train(torch, a)
    bad = compare(r1, r2)
    if r3["losses_hex"][:1] != r1["losses_hex"][:1]:
        bad.append("first loss with torch AdamW %s, with Megatron's DDP and optimizer %s" % (
            r3["losses_hex"][:1], r1["losses_hex"][:1]))
    r1.update(check=True, check_ok=not bad, torch_optimizer_losses_hex=r3["losses_hex"])
    emit(r1, a.out)
    for b in bad:
        print("mcore_gpt: check: " + b, file=sys.stderr)
    print("mcore_gpt: check %s: 2 runs x 2 steps x %d micro-batches, Megatron's optimizer and AdamW" % (
        "FAILED" if bad else "passed", a.micro_batches), file=sys.stderr)
    return 1 if bad else 0


def main():
    a = parse()
    if a.self_test:
        return self_test()
    # Megatron warns about every optional package it lacks (Apex, TE, absl): noise here.
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        import torch
        import megatron.core  # noqa: F401  (the check needs it; say so before anything else)
    except ImportError as e:
        print("mcore_gpt: %s; %s" % (e, "check skipped" if a.check else "cannot run"), file=sys.stderr)
        return SKIP if a.check else 2
    if a.device == "cpu":
        cpu_redirect(torch)
    elif not torch.cuda.is_available():
        print("mcore_gpt: no CUDA device visible to torch", file=sys.stderr)
        return 2
    if a.check:
        return check(torch, a)
    emit(train(torch, a), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
