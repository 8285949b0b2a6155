#!/usr/bin/env python3
"""All-reduce bus bandwidth of torch.distributed (NCCL backend) on N GPUs,
side by side with Emily.Distributed's NCCL transport in the same call.

    python3 bench/nccl_allreduce_torch.py                 # 2 GPUs, torch only
    python3 bench/nccl_allreduce_torch.py --with-emily    # + Emily, one table
    options: --gpus N (default 2), --max-mb M (largest message, default 64)

Needs PyTorch with CUDA (pip install torch) and N GPUs. --with-emily runs
`mix run bench/distributed_bench.exs --nccl --csv --ranks N --max-mb M` from
the repository root (Emily's NCCL comes from the same nvidia-nccl-cu* pip
package as torch's, or EMILY_NCCL_LIB).

Bus bandwidth as nccl-tests: busbw = 2 (n - 1) / n * bytes / time, float32
sum, sizes 4 KiB .. max-mb by factors of 4; each size: 5 warm-up calls, then
timed calls (at least 5, ~0.3 s), synchronised, the slowest rank's mean.
"""
import argparse
import os
import subprocess
import sys
import time


def sizes(max_bytes):
    s = 4096
    while s <= max_bytes:
        yield s
        s *= 4


def worker(rank, world, max_bytes, port, queue):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    results = []
    for nbytes in sizes(max_bytes):
        x = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        # one timed call decides the count (rank 0's, shared by a broadcast)
        t0 = time.perf_counter()
        dist.all_reduce(x)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        iters = torch.tensor([max(5, min(1000, int(0.3 / max(dt, 1e-7))))],
                             device="cuda")
        dist.broadcast(iters, 0)
        n = int(iters.item())
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        results.append((nbytes, (time.perf_counter() - t0) / n))
    queue.put((rank, results))
    dist.destroy_process_group()


def torch_table(world, max_bytes):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=worker, args=(r, world, max_bytes, port, queue))
             for r in range(world)]
    for p in procs:
        p.start()
    per_rank = dict(queue.get() for _ in procs)
    for p in procs:
        p.join()
    table = {}
    for i, (nbytes, _) in enumerate(per_rank[0]):
        secs = max(per_rank[r][i][1] for r in per_rank)
        table[nbytes] = (secs * 1e6, nbytes / secs / 1e9 * 2 * (world - 1) / world)
    return table


def emily_table(world, max_mb):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    cmd = ["mix", "run", "bench/distributed_bench.exs", "--nccl", "--csv",
           "--ranks", str(world), "--max-mb", str(max_mb)]
    out = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    table = {}
    for line in out.stdout.splitlines():
        if line.startswith("emily,"):
            _, nbytes, us, busbw = line.split(",")
            table[int(nbytes)] = (float(us), float(busbw))
    if not table:
        sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
        raise SystemExit("the Emily side gave no figures (see above)")
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--max-mb", type=int, default=64)
    ap.add_argument("--with-emily", action="store_true")
    args = ap.parse_args()
    import torch

    if torch.cuda.device_count() < args.gpus:
        raise SystemExit(f"needs {args.gpus} GPUs, found {torch.cuda.device_count()}")
    max_bytes = args.max_mb * 1024 * 1024
    t = torch_table(args.gpus, max_bytes)
    e = emily_table(args.gpus, args.max_mb) if args.with_emily else {}
    print(f"\nall_reduce (sum, f32), {args.gpus} GPUs, NCCL; "
          f"{torch.cuda.get_device_name(0)}; torch {torch.__version__}\n")
    head = f"{'bytes':>12} {'torch us':>10} {'torch busbw':>12}"
    if e:
        head += f" {'emily us':>10} {'emily busbw':>12} {'emily/torch':>12}"
    print(head + "   (busbw in GB/s)")
    for nbytes in sorted(t):
        us, bw = t[nbytes]
        row = f"{nbytes:>12} {us:>10.1f} {bw:>12.2f}"
        if nbytes in e:
            eus, ebw = e[nbytes]
            row += f" {eus:>10.1f} {ebw:>12.2f} {ebw / bw:>12.2f}"
        print(row)


if __name__ == "__main__":
    main()
