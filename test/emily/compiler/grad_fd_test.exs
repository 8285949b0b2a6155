defmodule Emily.Compiler.GradTest.Cases do
  @moduledoc false
  # {name, function, input shapes, input range}: Nx functions whose
  # Nx.Defn gradients, compiled by Emily.Compiler, are checked against
  # finite differences on Emily.Backend.

  def all do
    [
      {"select", fn p, a, b -> Nx.select(Nx.greater(p, 0.5), a, b) end, [{2, 3}, {2, 3}, {3}],
       {0, 1}},
      {"clip", fn x -> Nx.clip(x, 0.3, 0.7) end, [{2, 3}], {0, 1}},
      {"sum axes", fn x -> Nx.sum(x, axes: [1]) end, [{2, 3, 2}], {-2, 2}},
      {"product", fn x -> Nx.product(x, axes: [0]) end, [{3, 2}], {0.5, 1.5}},
      {"reduce_max", fn x -> Nx.reduce_max(x, axes: [1], keep_axes: true) end, [{2, 4}], {-2, 2}},
      {"reduce_min", fn x -> Nx.reduce_min(x) end, [{2, 4}], {-2, 2}},
      {"mean", fn x -> Nx.mean(x, axes: [0]) end, [{3, 2}], {-2, 2}},
      {"variance", fn x -> Nx.variance(x, axes: [1]) end, [{2, 4}], {-2, 2}},
      {"standard_deviation", fn x -> Nx.standard_deviation(x) end, [{2, 4}], {-2, 2}},
      {"logsumexp", fn x -> Nx.logsumexp(x, axes: [1]) end, [{2, 4}], {-2, 2}},
      {"reshape", fn x -> Nx.reshape(x, {3, 2}) end, [{2, 3}], {-2, 2}},
      {"new_axis+squeeze", fn x -> x |> Nx.new_axis(1) |> Nx.squeeze() end, [{2, 3}], {-2, 2}},
      {"flatten", fn x -> Nx.flatten(x) end, [{2, 3}], {-2, 2}},
      {"tile", fn x -> Nx.tile(x, [2, 1]) end, [{2, 3}], {-2, 2}},
      {"broadcast", fn x -> Nx.broadcast(x, {2, 3}) end, [{3}], {-2, 2}},
      {"transpose", fn x -> Nx.transpose(x) end, [{2, 3}], {-2, 2}},
      {"reverse", fn x -> Nx.reverse(x, axes: [1]) end, [{2, 3}], {-2, 2}},
      {"pad", fn x -> Nx.pad(x, 0.0, [{1, -1, 1}, {0, 2, 0}]) end, [{3, 2}], {-2, 2}},
      {"concatenate", fn a, b -> Nx.concatenate([a, b], axis: 1) end, [{2, 3}, {2, 1}], {-2, 2}},
      {"stack", fn a, b -> Nx.stack([a, b]) end, [{3}, {3}], {-2, 2}},
      {"slice", fn x -> Nx.slice(x, [0, 1], [2, 2], strides: [1, 1]) end, [{3, 3}], {-2, 2}},
      {"slice strided", fn x -> Nx.slice(x, [0, 0], [3, 2], strides: [2, 1]) end, [{4, 3}],
       {-2, 2}},
      {"slice_along_axis", fn x -> Nx.slice_along_axis(x, 1, 2, axis: 1) end, [{2, 4}], {-2, 2}},
      {"put_slice", fn a, b -> Nx.put_slice(a, [1, 0], b) end, [{3, 3}, {2, 2}], {-2, 2}},
      {"access", fn x -> x[[1..2, 0]] end, [{3, 2}], {-2, 2}},
      {"dot", fn a, b -> Nx.dot(a, b) end, [{2, 3}, {3, 2}], {-1, 1}},
      {"dot batched", fn a, b -> Nx.dot(a, [2], [0], b, [1], [0]) end, [{2, 3, 4}, {2, 4, 2}],
       {-1, 1}},
      {"outer", fn a, b -> Nx.outer(a, b) end, [{3}, {2}], {-1, 1}},
      {"as_type f32 -> f64", fn x -> x |> Nx.multiply(x) |> Nx.as_type(:f64) end, [{3}], {-1, 1}},
      {"take", fn x -> Nx.take(x, Nx.tensor([2, 0, 2]), axis: 1) end, [{2, 3}], {-2, 2}},
      {"take_along_axis", fn x -> Nx.take_along_axis(x, Nx.tensor([[0, 0], [2, 1]]), axis: 1) end,
       [{2, 3}], {-2, 2}},
      {"gather", fn x -> Nx.gather(x, Nx.tensor([[0, 1], [1, 2], [0, 1]])) end, [{2, 3}],
       {-2, 2}},
      {"indexed_add", fn x, u -> Nx.indexed_add(x, Nx.tensor([[0, 1], [1, 2], [0, 1]]), u) end,
       [{2, 3}, {3}], {-2, 2}},
      {"conv", fn x, k -> Nx.conv(x, k, strides: [2], padding: [{1, 1}]) end,
       [{2, 3, 6}, {4, 3, 2}], {-1, 1}},
      {"conv 2-d grouped, dilated",
       fn x, k ->
         Nx.conv(x, k, feature_group_size: 2, kernel_dilation: [1, 2], padding: :same)
       end, [{1, 4, 3, 5}, {2, 2, 2, 2}], {-1, 1}},
      {"slice with tensor starts", fn x -> Nx.slice(x, [Nx.tensor(1), 0], [2, 2]) end, [{4, 3}],
       {-2, 2}},
      {"put_slice with tensor starts", fn a, b -> Nx.put_slice(a, [0, Nx.tensor(1)], b) end,
       [{3, 3}, {2, 2}], {-2, 2}},
      {"log with base", fn x -> Nx.log(x, 3) end, [{3}], {0.5, 3}},
      {"weighted_mean", fn x, w -> Nx.weighted_mean(x, w) end, [{4}, {4}], {0.5, 2}},
      {"median", fn x -> Nx.median(x, axis: 1) end, [{2, 5}], {-2, 2}},
      {"covariance", fn x -> Nx.covariance(x) end, [{5, 2}], {-2, 2}},
      {"diff", fn x -> Nx.diff(x, order: 2) end, [{6}], {-2, 2}},
      {"split", fn x -> x |> Nx.split(2) |> elem(1) end, [{4}], {-2, 2}},
      {"take_diagonal", fn x -> Nx.take_diagonal(x) end, [{3, 3}], {-2, 2}},
      {"make_diagonal", fn x -> Nx.make_diagonal(x, offset: 1) end, [{3}], {-2, 2}},
      {"put_diagonal", fn x, d -> Nx.put_diagonal(x, d) end, [{3, 3}, {3}], {-2, 2}},
      {"tril", fn x -> Nx.tril(x) end, [{3, 3}], {-2, 2}},
      {"triu", fn x -> Nx.triu(x, k: 1) end, [{3, 3}], {-2, 2}},
      {"outer of flattened", fn a -> Nx.outer(a, a) end, [{2, 2}], {-1, 1}},
      {"sort", fn x -> Nx.sort(x, axis: 1, direction: :desc) end, [{2, 4}], {-2, 2}},
      {"top_k values", fn x -> elem(Nx.top_k(x, k: 2), 0) end, [{2, 4}], {-2, 2}},
      {"cumulative_sum", fn x -> Nx.cumulative_sum(x, axis: 1) end, [{2, 4}], {-2, 2}},
      {"cumulative_sum reverse", fn x -> Nx.cumulative_sum(x, reverse: true) end, [{4}], {-2, 2}},
      {"cumulative_product", fn x -> Nx.cumulative_product(x, axis: 0) end, [{3, 2}], {0.5, 1.5}},
      {"cumulative_max", fn x -> Nx.cumulative_max(x, axis: 1) end, [{2, 5}], {-2, 2}},
      {"cumulative_min", fn x -> Nx.cumulative_min(x, axis: 1, reverse: true) end, [{2, 5}],
       {-2, 2}},
      {"window_sum", fn x -> Nx.window_sum(x, {2, 2}, strides: [1, 2], padding: :same) end,
       [{3, 4}], {-2, 2}},
      {"window_mean", fn x -> Nx.window_mean(x, {2, 1}) end, [{3, 2}], {-2, 2}},
      {"window_max",
       fn x -> Nx.window_max(x, {2, 2}, strides: [2, 1], padding: [{0, 1}, {1, 0}]) end, [{3, 3}],
       {-2, 2}},
      {"window_min", fn x -> Nx.window_min(x, {1, 3}, padding: :valid) end, [{2, 4}], {-2, 2}},
      {"indexed_put", fn x, u -> Nx.indexed_put(x, Nx.tensor([[0, 1], [1, 2]]), u) end,
       [{2, 3}, {2}], {-2, 2}}
    ]
  end
end

defmodule Emily.Compiler.GradTest do
  @moduledoc false
  # Nx.Defn.grad through Emily.Compiler against central finite differences
  # on Emily.Backend, in f64: every unary and binary op, and the op families
  # of Emily.Compiler.GradTest.Cases.
  use ExUnit.Case, async: true

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  # value_and_grad of `loss` over a tuple of arguments, compiled by Emily.Compiler.
  # The weights `w` of the loss are a (non-differentiated) argument: Nx.Defn
  # does not lift tensors captured by the gradient closure.
  defp compiled_value_and_grad(f, w, xs) do
    fun = fn args, w ->
      Nx.Defn.value_and_grad(args, fn args ->
        Nx.sum(Nx.multiply(apply(f, Tuple.to_list(args)), w))
      end)
    end

    {value, grads} = Nx.Defn.jit(fun, compiler: Emily.Compiler).(List.to_tuple(xs), w)
    {value, Tuple.to_list(grads)}
  end

  # ---- finite differences ------------------------------------------------

  # Random f64 inputs in [lo, hi] of the given shape (deterministic per seed).
  defp random(shape, {lo, hi}, seed) do
    :rand.seed(:exsss, {seed, 7, 11})
    n = shape |> Tuple.to_list() |> Enum.product()
    values = for _ <- 1..max(n, 1), do: lo + (hi - lo) * :rand.uniform()
    values |> Enum.take(n) |> Nx.tensor(type: :f64) |> Nx.reshape(shape)
  end

  # L(xs) = sum(f(xs) * w): its gradient against central differences.
  defp check_grad(name, f, shapes, range) do
    xs = shapes |> Enum.with_index() |> Enum.map(fn {s, i} -> random(s, range, 100 + i) end)
    out_shape = Nx.shape(apply(f, xs))
    w = random(out_shape, {-1.0, 1.0}, 99)
    loss = fn args -> Nx.sum(Nx.multiply(apply(f, args), w)) end
    argnums = Enum.to_list(0..(length(xs) - 1))

    {_value, grads} = compiled_value_and_grad(f, w, xs)

    assert length(grads) == length(argnums)

    for {x, i} <- Enum.with_index(xs) do
      flat = Nx.to_flat_list(x)
      g = Nx.to_flat_list(Enum.at(grads, i))

      for {_, j} <- Enum.with_index(flat) do
        h = 1.0e-6

        at = fn d ->
          List.update_at(flat, j, &(&1 + d)) |> Nx.tensor(type: :f64) |> Nx.reshape(x.shape)
        end

        up = loss.(List.replace_at(xs, i, at.(h))) |> Nx.to_number()
        down = loss.(List.replace_at(xs, i, at.(-h))) |> Nx.to_number()
        fd = (up - down) / (2 * h)
        got = Enum.at(g, j)

        assert abs(fd - got) <= 1.0e-5 * (1 + abs(fd)),
               "#{name}: d/dx#{i}[#{j}] = #{got}, finite difference #{fd}"
      end
    end
  end

  @unary [
    {:exp, {-2, 2}},
    {:expm1, {-2, 2}},
    {:log, {0.5, 3}},
    {:log1p, {-0.5, 3}},
    {:sigmoid, {-3, 3}},
    {:cos, {-3, 3}},
    {:sin, {-3, 3}},
    {:tan, {-1, 1}},
    {:cosh, {-2, 2}},
    {:sinh, {-2, 2}},
    {:tanh, {-2, 2}},
    {:acos, {-0.9, 0.9}},
    {:asin, {-0.9, 0.9}},
    {:atan, {-3, 3}},
    {:acosh, {1.2, 3}},
    {:asinh, {-3, 3}},
    {:atanh, {-0.9, 0.9}},
    {:sqrt, {0.5, 3}},
    {:rsqrt, {0.5, 3}},
    {:cbrt, {0.3, 3}},
    {:erf, {-2, 2}},
    {:erfc, {-2, 2}},
    {:erf_inv, {-0.9, 0.9}},
    {:log2, {0.5, 3}},
    {:log10, {0.5, 3}},
    {:negate, {-2, 2}},
    {:abs, {0.1, 2}}
  ]

  for {op, range} <- @unary do
    test "grad of #{op} matches finite differences" do
      check_grad(
        unquote(op),
        &apply(Nx, unquote(op), [&1]),
        [{2, 3}],
        unquote(Macro.escape(range))
      )
    end
  end

  @binary [
    {:add, {-2, 2}},
    {:subtract, {-2, 2}},
    {:multiply, {-2, 2}},
    {:divide, {0.5, 2}},
    {:pow, {0.5, 2}},
    {:remainder, {0.3, 2}},
    {:atan2, {-2, 2}},
    {:max, {-2, 2}},
    {:min, {-2, 2}}
  ]

  for {op, range} <- @binary do
    test "grad of #{op} (broadcasting) matches finite differences" do
      check_grad(
        unquote(op),
        &apply(Nx, unquote(op), [&1, &2]),
        [{2, 3}, {3}],
        unquote(Macro.escape(range))
      )
    end
  end

  for {{name, _f, _shapes, _range}, i} <- Enum.with_index(Emily.Compiler.GradTest.Cases.all()) do
    test "grad of #{name} matches finite differences" do
      {name, f, shapes, range} = Enum.at(Emily.Compiler.GradTest.Cases.all(), unquote(i))
      check_grad(name, f, shapes, range)
    end
  end

  # ---- composites ---------------------------------------------------------

  defp softmax_cross_entropy(logits, labels_one_hot) do
    log_probs = Nx.subtract(logits, Nx.logsumexp(logits, axes: [1], keep_axes: true))
    Nx.negate(Nx.mean(Nx.sum(Nx.multiply(log_probs, labels_one_hot), axes: [1])))
  end

  test "MLP loss with softmax cross-entropy matches finite differences" do
    # Constants built inside the traced function (not captured tensors).
    x_list = Nx.to_list(random({4, 3}, {-1, 1}, 1))

    mlp = fn w1, b1, w2 ->
      x = Nx.tensor(x_list, type: :f64)
      labels = Nx.tensor([[1, 0], [0, 1], [0, 1], [1, 0]], type: :f64)
      h = x |> Nx.dot(w1) |> Nx.add(b1) |> Nx.max(0.0)

      softmax_cross_entropy(Nx.dot(h, w2), labels)
      |> Nx.broadcast({1})
    end

    check_grad("mlp", mlp, [{3, 5}, {5}, {5, 2}], {-1, 1})
  end

  test "layer norm matches finite differences" do
    ln = fn x, gamma ->
      mean = Nx.mean(x, axes: [1], keep_axes: true)
      var = Nx.variance(x, axes: [1], keep_axes: true)
      x |> Nx.subtract(mean) |> Nx.multiply(Nx.rsqrt(Nx.add(var, 1.0e-5))) |> Nx.multiply(gamma)
    end

    check_grad("layer_norm", ln, [{3, 4}, {4}], {-1, 1})
  end

  defp jit(fun), do: Nx.Defn.jit(fun, compiler: Emily.Compiler)

  test "value_and_grad returns the value and hand-derived gradients" do
    f = fn a, b ->
      Nx.Defn.value_and_grad({a, b}, fn {a, b} -> Nx.add(Nx.tanh(a), Nx.pow(b, 2)) end)
    end

    {value, {ga, gb}} = jit(f).(Nx.tensor(1.0, type: :f64), Nx.tensor(2.0, type: :f64))

    assert_in_delta Nx.to_number(value), :math.tanh(1.0) + 4.0, 1.0e-12
    assert_in_delta Nx.to_number(ga), 1 - :math.pow(:math.tanh(1.0), 2), 1.0e-12
    assert Nx.to_number(gb) == 4.0
  end

  test "nested containers keep their structure; stop_gradient is a constant" do
    params = %{layer: {Nx.tensor([1.0, 2.0]), Nx.tensor(3.0)}}

    f = fn p ->
      Nx.Defn.grad(p, fn %{layer: {w, b}} ->
        Nx.multiply(Nx.add(Nx.sum(Nx.multiply(w, w)), b), 2.0)
      end)
    end

    %{layer: {gw, gb}} = jit(f).(params)
    assert Nx.to_list(gw) == [4.0, 8.0]
    assert Nx.to_number(gb) == 2.0

    g =
      jit(fn x ->
        Nx.Defn.grad(x, &Nx.sum(Nx.multiply(&1, Nx.Defn.Kernel.stop_grad(Nx.exp(&1)))))
      end)

    assert_in_delta Enum.at(Nx.to_list(g.(Nx.tensor([0.0, 1.0]))), 1), :math.exp(1.0), 1.0e-6
  end

  test "non-differentiable paths give zeros" do
    g = jit(fn x -> Nx.Defn.grad(x, &Nx.sum(Nx.as_type(Nx.argmax(&1), :f32))) end)
    assert Nx.to_list(g.(Nx.tensor([1.0, 3.0]))) == [0.0, 0.0]
  end

  test "every float type: gradients match the f64 derivative" do
    values = [-1.5, -0.25, 0.5, 2.0]
    # d/dx sum(tanh(x) * x) = tanh(x) + x (1 - tanh(x)^2)
    expected = Enum.map(values, fn x -> :math.tanh(x) + x * (1 - :math.pow(:math.tanh(x), 2)) end)
    g = jit(fn x -> Nx.Defn.grad(x, &Nx.sum(Nx.multiply(Nx.tanh(&1), &1))) end)

    for {type, tol} <- [{:f64, 1.0e-12}, {:f32, 1.0e-5}, {:f16, 1.0e-2}, {:bf16, 5.0e-2}] do
      # Nx's own rules promote half-precision gradients to f32 (on every compiler).
      out = g.(Nx.tensor(values, type: type))

      for {got, want} <- Enum.zip(Nx.to_list(out), expected),
          do: assert_in_delta(got, want, tol * (1 + abs(want)), "#{type}")
    end
  end

  test "strided inputs: a transposed, sliced view is differentiated" do
    base = Nx.iota({3, 4}, type: :f64)
    view = base |> Nx.transpose() |> Nx.slice([1, 0], [2, 3])
    c = Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], type: :f64)
    f = fn v, c -> Nx.Defn.value_and_grad(v, &Nx.sum(Nx.multiply(Nx.multiply(&1, &1), c))) end
    {value, g} = jit(f).(view, c)
    assert Nx.to_list(g) == Nx.to_list(Nx.multiply(Nx.multiply(view, c), 2.0))
    assert Nx.to_number(value) == Nx.to_number(Nx.sum(Nx.multiply(Nx.multiply(view, view), c)))
  end
end
