# The 64-128-10 MLP of examples/mlp_digits.exs (ReLU, softmax
# cross-entropy, SGD with momentum 0.9 and learning rate 0.05): the training
# step is one defn (forward pass, Nx.Defn.value_and_grad, update), shared by
# the example and bench/digits_train_bench.exs.
defmodule MLPDigits do
  import Nx.Defn

  @momentum 0.9
  @lr 0.05

  defn logits(p, x) do
    x |> Nx.dot(p.w1) |> Nx.add(p.b1) |> Nx.max(0.0) |> Nx.dot(p.w2) |> Nx.add(p.b2)
  end

  defn loss(p, x, y) do
    z = logits(p, x)
    log_probs = z - Nx.logsumexp(z, axes: [1], keep_axes: true)
    -Nx.mean(Nx.sum(log_probs * y, axes: [1]))
  end

  defn train_step(params, velocity, x, y) do
    {loss, grads} = value_and_grad(params, &loss(&1, x, y))

    velocity = %{
      w1: velocity.w1 * @momentum + grads.w1,
      b1: velocity.b1 * @momentum + grads.b1,
      w2: velocity.w2 * @momentum + grads.w2,
      b2: velocity.b2 * @momentum + grads.b2
    }

    params = %{
      w1: params.w1 - velocity.w1 * @lr,
      b1: params.b1 - velocity.b1 * @lr,
      w2: params.w2 - velocity.w2 * @lr,
      b2: params.b2 - velocity.b2 * @lr
    }

    {loss, params, velocity}
  end

  defn(predict(p, x), do: Nx.argmax(logits(p, x), axis: 1))
end
