defmodule Emily.Tensor.Compiler.AutodiffTest.Cases do
  @moduledoc false
  # {name, function, input shapes, input range}: Emily.Tensor functions
  # checked against finite differences.
  alias Emily.Tensor, as: T

  def all do
    [
      {"select", fn p, a, b -> T.select(T.greater(p, 0.5), a, b) end, [{2, 3}, {2, 3}, {3}],
       {0, 1}},
      {"clip", fn x -> T.clip(x, 0.3, 0.7) end, [{2, 3}], {0, 1}},
      {"sum axes", fn x -> T.sum(x, axes: [1]) end, [{2, 3, 2}], {-2, 2}},
      {"product", fn x -> T.product(x, axes: [0]) end, [{3, 2}], {0.5, 1.5}},
      {"reduce_max", fn x -> T.reduce_max(x, axes: [1], keep_axes: true) end, [{2, 4}], {-2, 2}},
      {"reduce_min", fn x -> T.reduce_min(x) end, [{2, 4}], {-2, 2}},
      {"mean", fn x -> T.mean(x, axes: [0]) end, [{3, 2}], {-2, 2}},
      {"variance", fn x -> T.variance(x, axes: [1]) end, [{2, 4}], {-2, 2}},
      {"standard_deviation", fn x -> T.standard_deviation(x) end, [{2, 4}], {-2, 2}},
      {"logsumexp", fn x -> T.logsumexp(x, axes: [1]) end, [{2, 4}], {-2, 2}},
      {"reshape", fn x -> T.reshape(x, {3, 2}) end, [{2, 3}], {-2, 2}},
      {"new_axis+squeeze", fn x -> x |> T.new_axis(1) |> T.squeeze() end, [{2, 3}], {-2, 2}},
      {"flatten", fn x -> T.flatten(x) end, [{2, 3}], {-2, 2}},
      {"tile", fn x -> T.tile(x, [2, 1]) end, [{2, 3}], {-2, 2}},
      {"broadcast", fn x -> T.broadcast(x, {2, 3}) end, [{3}], {-2, 2}},
      {"transpose", fn x -> T.transpose(x) end, [{2, 3}], {-2, 2}},
      {"reverse", fn x -> T.reverse(x, axes: [1]) end, [{2, 3}], {-2, 2}},
      {"pad", fn x -> T.pad(x, 0.0, [{1, -1, 1}, {0, 2, 0}]) end, [{3, 2}], {-2, 2}},
      {"concatenate", fn a, b -> T.concatenate([a, b], axis: 1) end, [{2, 3}, {2, 1}], {-2, 2}},
      {"stack", fn a, b -> T.stack([a, b]) end, [{3}, {3}], {-2, 2}},
      {"slice", fn x -> T.slice(x, [0, 1], [2, 2], strides: [1, 1]) end, [{3, 3}], {-2, 2}},
      {"slice strided", fn x -> T.slice(x, [0, 0], [3, 2], strides: [2, 1]) end, [{4, 3}],
       {-2, 2}},
      {"slice_along_axis", fn x -> T.slice_along_axis(x, 1, 2, axis: 1) end, [{2, 4}], {-2, 2}},
      {"put_slice", fn a, b -> T.put_slice(a, [1, 0], b) end, [{3, 3}, {2, 2}], {-2, 2}},
      {"access", fn x -> x[[1..2, 0]] end, [{3, 2}], {-2, 2}},
      {"dot", fn a, b -> T.dot(a, b) end, [{2, 3}, {3, 2}], {-1, 1}},
      {"dot batched", fn a, b -> T.dot(a, [2], [0], b, [1], [0]) end, [{2, 3, 4}, {2, 4, 2}],
       {-1, 1}},
      {"outer", fn a, b -> T.outer(a, b) end, [{3}, {2}], {-1, 1}},
      {"as_type f32 -> f64", fn x -> x |> T.multiply(x) |> T.as_type(:f64) end, [{3}], {-1, 1}},
      {"take", fn x -> T.take(x, T.tensor([2, 0, 2]), axis: 1) end, [{2, 3}], {-2, 2}},
      {"take_along_axis", fn x -> T.take_along_axis(x, T.tensor([[0, 0], [2, 1]]), axis: 1) end,
       [{2, 3}], {-2, 2}},
      {"gather", fn x -> T.gather(x, T.tensor([[0, 1], [1, 2], [0, 1]])) end, [{2, 3}], {-2, 2}},
      {"indexed_add", fn x, u -> T.indexed_add(x, T.tensor([[0, 1], [1, 2], [0, 1]]), u) end,
       [{2, 3}, {3}], {-2, 2}},
      {"conv", fn x, k -> T.conv(x, k, strides: [2], padding: [{1, 1}]) end,
       [{2, 3, 6}, {4, 3, 2}], {-1, 1}},
      {"conv 2-d grouped, dilated",
       fn x, k ->
         T.conv(x, k, feature_group_size: 2, kernel_dilation: [1, 2], padding: :same)
       end, [{1, 4, 3, 5}, {2, 2, 2, 2}], {-1, 1}},
      {"slice with tensor starts", fn x -> T.slice(x, [T.tensor(1), 0], [2, 2]) end, [{4, 3}],
       {-2, 2}},
      {"put_slice with tensor starts", fn a, b -> T.put_slice(a, [0, T.tensor(1)], b) end,
       [{3, 3}, {2, 2}], {-2, 2}},
      {"log with base", fn x -> T.log(x, 3) end, [{3}], {0.5, 3}},
      {"weighted_mean", fn x, w -> T.weighted_mean(x, w) end, [{4}, {4}], {0.5, 2}},
      {"median", fn x -> T.median(x, axis: 1) end, [{2, 5}], {-2, 2}},
      {"covariance", fn x -> T.covariance(x) end, [{5, 2}], {-2, 2}},
      {"diff", fn x -> T.diff(x, order: 2) end, [{6}], {-2, 2}},
      {"split", fn x -> x |> T.split(2) |> elem(1) end, [{4}], {-2, 2}},
      {"take_diagonal", fn x -> T.take_diagonal(x) end, [{3, 3}], {-2, 2}},
      {"make_diagonal", fn x -> T.make_diagonal(x, offset: 1) end, [{3}], {-2, 2}},
      {"put_diagonal", fn x, d -> T.put_diagonal(x, d) end, [{3, 3}, {3}], {-2, 2}},
      {"tril", fn x -> T.tril(x) end, [{3, 3}], {-2, 2}},
      {"triu", fn x -> T.triu(x, k: 1) end, [{3, 3}], {-2, 2}},
      {"outer of flattened", fn a -> T.outer(a, a) end, [{2, 2}], {-1, 1}},
      {"sort", fn x -> T.sort(x, axis: 1, direction: :desc) end, [{2, 4}], {-2, 2}},
      {"top_k values", fn x -> elem(T.top_k(x, k: 2), 0) end, [{2, 4}], {-2, 2}},
      {"cumulative_sum", fn x -> T.cumulative_sum(x, axis: 1) end, [{2, 4}], {-2, 2}},
      {"cumulative_sum reverse", fn x -> T.cumulative_sum(x, reverse: true) end, [{4}], {-2, 2}},
      {"cumulative_product", fn x -> T.cumulative_product(x, axis: 0) end, [{3, 2}], {0.5, 1.5}},
      {"cumulative_max", fn x -> T.cumulative_max(x, axis: 1) end, [{2, 5}], {-2, 2}},
      {"cumulative_min", fn x -> T.cumulative_min(x, axis: 1, reverse: true) end, [{2, 5}],
       {-2, 2}},
      {"window_sum", fn x -> T.window_sum(x, {2, 2}, strides: [1, 2], padding: :same) end,
       [{3, 4}], {-2, 2}},
      {"window_mean", fn x -> T.window_mean(x, {2, 1}) end, [{3, 2}], {-2, 2}},
      {"window_max",
       fn x -> T.window_max(x, {2, 2}, strides: [2, 1], padding: [{0, 1}, {1, 0}]) end, [{3, 3}],
       {-2, 2}},
      {"window_min", fn x -> T.window_min(x, {1, 3}, padding: :valid) end, [{2, 4}], {-2, 2}},
      {"window_product", fn x -> T.window_product(x, {2, 2}, window_dilations: [1, 2]) end,
       [{3, 4}], {0.5, 1.5}},
      {"indexed_put", fn x, u -> T.indexed_put(x, T.tensor([[0, 1], [1, 2]]), u) end,
       [{2, 3}, {2}], {-2, 2}}
    ]
  end
end

defmodule Emily.Tensor.Compiler.AutodiffTest do
  use ExUnit.Case, async: true
  doctest Emily.Tensor.Compiler.Autodiff

  alias Emily.Tensor.Compiler.Autodiff, as: AD
  alias Emily.Tensor, as: T

  # ---- finite differences ------------------------------------------------

  # Random f64 inputs in [lo, hi] of the given shape (deterministic per seed).
  defp random(shape, {lo, hi}, seed) do
    :rand.seed(:exsss, {seed, 7, 11})
    n = shape |> Tuple.to_list() |> Enum.product()
    values = for _ <- 1..max(n, 1), do: lo + (hi - lo) * :rand.uniform()
    values |> Enum.take(n) |> T.tensor(type: :f64) |> T.reshape(shape)
  end

  # L(xs) = sum(f(xs) * w): its gradient against central differences.
  defp check_grad(name, f, shapes, range) do
    xs = shapes |> Enum.with_index() |> Enum.map(fn {s, i} -> random(s, range, 100 + i) end)
    out_shape = T.shape(apply(f, xs))
    w = random(out_shape, {-1.0, 1.0}, 99)
    loss = fn args -> T.sum(T.multiply(apply(f, args), w)) end
    argnums = Enum.to_list(0..(length(xs) - 1))

    {_value, grads} =
      AD.value_and_grad(fn list -> loss.(list) end, argnums: [0]).(xs)
      |> then(fn {v, {g}} -> {v, g} end)

    assert length(grads) == length(argnums)

    for {x, i} <- Enum.with_index(xs) do
      flat = T.to_flat_list(x)
      g = T.to_flat_list(Enum.at(grads, i))

      for {_, j} <- Enum.with_index(flat) do
        h = 1.0e-6

        at = fn d ->
          List.update_at(flat, j, &(&1 + d)) |> T.tensor(type: :f64) |> T.reshape(x.shape)
        end

        up = loss.(List.replace_at(xs, i, at.(h))) |> T.to_number()
        down = loss.(List.replace_at(xs, i, at.(-h))) |> T.to_number()
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
        &apply(T, unquote(op), [&1]),
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
        &apply(T, unquote(op), [&1, &2]),
        [{2, 3}, {3}],
        unquote(Macro.escape(range))
      )
    end
  end

  for {{name, _f, _shapes, _range}, i} <- Enum.with_index(Emily.Tensor.Compiler.AutodiffTest.Cases.all()) do
    test "grad of #{name} matches finite differences" do
      {name, f, shapes, range} = Enum.at(Emily.Tensor.Compiler.AutodiffTest.Cases.all(), unquote(i))
      check_grad(name, f, shapes, range)
    end
  end

  # ---- composites ---------------------------------------------------------

  defp softmax_cross_entropy(logits, labels_one_hot) do
    log_probs = T.subtract(logits, T.logsumexp(logits, axes: [1], keep_axes: true))
    T.negate(T.mean(T.sum(T.multiply(log_probs, labels_one_hot), axes: [1])))
  end

  test "MLP loss with softmax cross-entropy matches finite differences" do
    x = random({4, 3}, {-1, 1}, 1)
    labels = T.tensor([[1, 0], [0, 1], [0, 1], [1, 0]], type: :f64)

    mlp = fn w1, b1, w2 ->
      h = x |> T.dot(w1) |> T.add(b1) |> T.max(0.0)

      softmax_cross_entropy(T.dot(h, w2), labels)
      |> T.broadcast({1})
    end

    check_grad("mlp", mlp, [{3, 5}, {5}, {5, 2}], {-1, 1})
  end

  test "jit(value_and_grad(f)) replays forward and backward bit-identically to eager" do
    x = random({8, 3}, {-1, 1}, 4)
    labels = T.tensor(for(i <- 0..7, do: if(rem(i, 2) == 0, do: [1, 0], else: [0, 1])), type: :f64)

    loss = fn {w1, b1, w2} ->
      h = x |> T.dot(w1) |> T.add(b1) |> T.max(0.0)
      softmax_cross_entropy(T.dot(h, w2), labels)
    end

    params = {random({3, 5}, {-1, 1}, 5), random({5}, {-1, 1}, 6), random({5, 2}, {-1, 1}, 7)}
    eager = Emily.Tensor.Compiler.value_and_grad(loss)
    compiled = Emily.Tensor.Compiler.jit(eager)
    flat = fn {v, {a, b, c}} -> Enum.map([v, a, b, c], &T.to_binary/1) end

    expected = flat.(eager.(params))
    assert flat.(compiled.(params)) == expected
    assert flat.(compiled.(params)) == expected
    assert %{hits: 1, misses: 1} = Emily.Tensor.Compiler.cache_info(compiled)
  end

  test "layer norm matches finite differences" do
    ln = fn x, gamma ->
      mean = T.mean(x, axes: [1], keep_axes: true)
      var = T.variance(x, axes: [1], keep_axes: true)
      x |> T.subtract(mean) |> T.multiply(T.rsqrt(T.add(var, 1.0e-5))) |> T.multiply(gamma)
    end

    check_grad("layer_norm", ln, [{3, 4}, {4}], {-1, 1})
  end

  test "value_and_grad returns the value and hand-derived gradients" do
    f = fn a, b -> T.add(T.tanh(a), T.pow(b, 2)) end

    {value, {ga, gb}} =
      AD.value_and_grad(f, argnums: [0, 1]).(T.tensor(1.0, type: :f64), T.tensor(2.0, type: :f64))

    assert_in_delta T.to_number(value), :math.tanh(1.0) + 4.0, 1.0e-12
    assert_in_delta T.to_number(ga), 1 - :math.pow(:math.tanh(1.0), 2), 1.0e-12
    assert T.to_number(gb) == 4.0
  end

  test "nested containers keep their structure" do
    params = %{layer: {T.tensor([1.0, 2.0]), [T.tensor(3.0)]}, scale: 2.0}

    f = fn %{layer: {w, [b]}, scale: s} ->
      T.multiply(T.add(T.sum(T.multiply(w, w)), b), s)
    end

    %{layer: {gw, [gb]}, scale: gs} = AD.grad(f).(params)
    assert T.to_list(gw) == [4.0, 8.0]
    assert T.to_number(gb) == 2.0
    assert T.to_number(gs) == 8.0
  end

  test "the same handle passed twice gets two gradients" do
    x = T.tensor([1.0, 2.0])

    {gx, gy} =
      AD.grad(fn a, b -> T.sum(T.multiply(a, T.multiply(b, 3.0))) end, argnums: [0, 1]).(x, x)

    assert T.to_list(gx) == [3.0, 6.0]
    assert T.to_list(gy) == [3.0, 6.0]
  end

  test "stop_gradient treats its input as a constant" do
    g =
      AD.grad(fn x -> T.sum(T.multiply(x, AD.stop_gradient(T.exp(x)))) end).(T.tensor([0.0, 1.0]))

    assert_in_delta Enum.at(T.to_list(g), 1), :math.exp(1.0), 1.0e-6
    assert T.to_number(AD.stop_gradient({T.tensor(1.0), [2]}) |> elem(0)) == 1.0
  end

  test "values read inside: integers and stop_gradient are constants" do
    x = T.tensor([1.0, 5.0, 2.0])

    g =
      AD.grad(fn x ->
        i = T.argmax(x)
        _ = T.to_number(i)
        T.multiply(T.take(x, T.reshape(i, {1})), 3.0) |> T.sum()
      end).(x)

    assert T.to_list(g) == [0.0, 3.0, 0.0]

    g =
      AD.grad(fn x ->
        y = T.exp(x)
        _ = T.to_list(y)
        T.sum(T.multiply(AD.stop_gradient(y), x))
      end).(x)

    assert T.to_list(g) == T.to_list(T.exp(x))
  end

  test "integer inputs are differentiated as f32" do
    g = AD.grad(fn x -> T.sum(T.multiply(x, x)) end).(T.tensor([3, -1]))
    assert g.type == {:f, 32}
    assert T.to_list(g) == [6.0, -2.0]
    assert T.to_number(AD.grad(fn x -> T.multiply(x, 5) end).(2)) == 5.0
  end

  test "non-differentiable paths give zeros" do
    g = AD.grad(fn x -> T.sum(T.as_type(T.argmax(x), :f32)) end).(T.tensor([1.0, 3.0]))
    assert T.to_list(g) == [0.0, 0.0]
    g = AD.grad(fn _x -> T.tensor(2.0) end).(T.tensor([1.0]))
    assert T.to_list(g) == [0.0]
  end

  test "every float type: gradients match the f64 derivative" do
    values = [-1.5, -0.25, 0.5, 2.0]
    # d/dx sum(tanh(x) * x) = tanh(x) + x (1 - tanh(x)^2)
    expected = Enum.map(values, fn x -> :math.tanh(x) + x * (1 - :math.pow(:math.tanh(x), 2)) end)
    f = fn x -> T.sum(T.multiply(T.tanh(x), x)) end

    for {type, tol} <- [{:f64, 1.0e-12}, {:f32, 1.0e-5}, {:f16, 1.0e-2}, {:bf16, 5.0e-2}] do
      g = AD.grad(f).(T.tensor(values, type: type))
      assert g.type == T.type(T.tensor(values, type: type))

      for {got, want} <- Enum.zip(T.to_list(g), expected),
          do: assert_in_delta(got, want, tol * (1 + abs(want)), "#{type}")
    end
  end

  test "strided inputs: a transposed, sliced view is differentiated in place" do
    base = T.iota({3, 4}, type: :f64)
    view = base |> T.transpose() |> T.slice([1, 0], [2, 3])
    c = T.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], type: :f64)
    {value, g} = AD.value_and_grad(fn v -> T.sum(T.multiply(T.multiply(v, v), c)) end).(view)
    assert T.to_list(g) == T.to_list(T.multiply(T.multiply(view, c), 2.0))
    assert T.to_number(value) == T.to_number(T.sum(T.multiply(T.multiply(view, view), c)))
  end

  test "a cotangent option allows non-scalar outputs" do
    {value, g} =
      AD.value_and_grad(fn x -> T.multiply(x, x) end, cotangent: T.tensor([1.0, 10.0])).(
        T.tensor([1.0, 2.0])
      )

    assert T.to_list(value) == [1.0, 4.0]
    assert T.to_list(g) == [2.0, 40.0]
  end

  test "errors: non-scalar output, evaluated inside, no rule, bad argnums" do
    assert_raise ArgumentError, ~r/must return a scalar tensor/, fn ->
      AD.grad(fn x -> T.exp(x) end).(T.tensor([1.0, 2.0]))
    end

    assert_raise ArgumentError, ~r/was evaluated inside the differentiated function/, fn ->
      AD.grad(fn x ->
        y = T.exp(x)
        _ = T.to_number(y)
        y
      end).(T.tensor(1.0))
    end

    assert_raise ArgumentError, ~r/grad: no gradient rule for linalg/, fn ->
      AD.grad(fn x -> T.sum(Emily.Tensor.LinAlg.cholesky(x)) end).(T.tensor([[4.0]]))
    end

    assert_raise ArgumentError, ~r/no gradient rule for conv with batch_groups/, fn ->
      kernel = T.tensor([[[1.0, 2.0]], [[3.0, 4.0]]])
      f = fn x -> T.sum(T.conv(x, kernel, batch_group_size: 2)) end
      AD.grad(f).(T.tensor([[[2.0, 1.0, 3.0]], [[1.0, 1.0, 1.0]]]))
    end

    assert_raise ArgumentError, ~r/gradients through complex values are not supported/, fn ->
      AD.grad(fn x -> T.sum(T.real(T.fft(x))) end).(T.tensor([2.0, 1.0]))
    end

    assert_raise ArgumentError, ~r/argnums/, fn -> AD.grad(fn x -> x end, argnums: 1) end

    assert_raise ArgumentError, ~r/cotangent/, fn ->
      AD.grad(fn x -> x end, cotangent: T.tensor([1.0])).(T.tensor([1.0, 2.0]))
    end

    assert_raise ArgumentError, ~r/expected tensors/, fn -> AD.grad(fn x -> x end).(:oops) end
  end
end
