"""One MLP training step, numpy (hand-written forward and backward) and
MLX CPU (mx.compile(mx.value_and_grad(...))), for bench/mlp_train_bench.exs.

    python3 bench/mlp_train_bench.py [reps] [numpy]   ("numpy": skip MLX)

MLP 784-512-512-10, ReLU, softmax cross-entropy, batch 128, f32, one SGD
update per step. Inputs and weights are deterministic formulas (sines of a
counter) that the Elixir side computes too, so the first-step losses of all
three can be compared. Prints one JSON object: per library the median
ms/step and the losses of the first and the last step (the last one checks
that the gradients agree). MLX is optional (pip install mlx
mlx-cpu): absent, it is reported as null.
"""
import json
import statistics
import sys
import time

import numpy as np

BATCH, SIZES, LR = 128, [784, 512, 512, 10], 0.01
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
WARMUP = 5


def counter_sin(shape, seed, scale):
    n = int(np.prod(shape))
    return (np.sin(np.arange(n, dtype=np.float64) * 1.3 + seed) * scale).astype(
        np.float32).reshape(shape)


def problem():
    x = counter_sin((BATCH, SIZES[0]), 0.0, 1.0)
    labels = (np.arange(BATCH) * 7) % 10
    y = np.eye(10, dtype=np.float32)[labels]
    params = []
    for i, (fan_in, fan_out) in enumerate(zip(SIZES, SIZES[1:])):
        params.append(counter_sin((fan_in, fan_out), 1.0 + i, np.sqrt(2.0 / fan_in)))
        params.append(np.zeros(fan_out, np.float32))
    return x, y, params


def numpy_step(params, x, y):
    w1, b1, w2, b2, w3, b3 = params
    z1 = x @ w1 + b1
    h1 = np.maximum(z1, 0)
    z2 = h1 @ w2 + b2
    h2 = np.maximum(z2, 0)
    z3 = h2 @ w3 + b3
    m = z3.max(axis=1, keepdims=True)
    e = np.exp(z3 - m)
    s = e.sum(axis=1, keepdims=True)
    log_probs = z3 - m - np.log(s)
    loss = -(log_probs * y).sum(axis=1).mean()
    dz3 = (e / s - y) / x.shape[0]
    dw3, db3 = h2.T @ dz3, dz3.sum(axis=0)
    dz2 = (dz3 @ w3.T) * (z2 > 0)
    dw2, db2 = h1.T @ dz2, dz2.sum(axis=0)
    dz1 = (dz2 @ w2.T) * (z1 > 0)
    dw1, db1 = x.T @ dz1, dz1.sum(axis=0)
    grads = [dw1, db1, dw2, db2, dw3, db3]
    return [p - LR * g for p, g in zip(params, grads)], float(loss)


def timed(step, params, reps):
    losses, times = [], []
    for i in range(WARMUP + reps):
        t0 = time.perf_counter()
        params, loss = step(params)
        times.append(time.perf_counter() - t0)
        losses.append(loss)
    return statistics.median(times[WARMUP:]) * 1e3, losses[0], losses[-1]


def run_numpy():
    x, y, params = problem()
    return timed(lambda p: numpy_step(p, x, y), params, REPS)


def run_mlx():
    try:
        import mlx.core as mx
    except ImportError:
        return None
    mx.set_default_device(mx.cpu)
    x, y, params = problem()
    x, y = mx.array(x), mx.array(y)
    params = [mx.array(p) for p in params]

    def loss_fn(params, x, y):
        w1, b1, w2, b2, w3, b3 = params
        h = mx.maximum(x @ w1 + b1, 0)
        h = mx.maximum(h @ w2 + b2, 0)
        z = h @ w3 + b3
        log_probs = z - mx.logsumexp(z, axis=1, keepdims=True)
        return -(log_probs * y).sum(axis=1).mean()

    grad_fn = mx.value_and_grad(loss_fn)

    @mx.compile
    def step(params, x, y):
        loss, grads = grad_fn(params, x, y)
        return [p - LR * g for p, g in zip(params, grads)], loss

    def one(params):
        params, loss = step(params, x, y)
        mx.eval(params, loss)
        return params, loss.item()

    return timed(one, params, REPS)


def main():
    numpy_only = len(sys.argv) > 2 and sys.argv[2] == "numpy"
    result = {"numpy": run_numpy(), "mlx": None if numpy_only else run_mlx()}
    print(json.dumps({k: (None if v is None else
                          {"ms": v[0], "first_loss": v[1], "last_loss": v[2]})
                      for k, v in result.items()}))


if __name__ == "__main__":
    main()
