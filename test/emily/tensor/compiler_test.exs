defmodule Emily.Tensor.CompilerTest do
  # Telemetry handlers are global: not async.
  use ExUnit.Case, async: false

  alias Emily.Tensor.Compiler
  alias Emily.Tensor, as: T
  alias Emily.Tensor.LinAlg
  alias Emily.Tensor.Random

  doctest Emily.Tensor.Compiler

  # Random inputs from a fixed seed (the oracle is the eager run of the
  # same function on the same inputs: replay must give the same bits).
  defp rand(shape, type \\ {:f, 32}, seed \\ 1) do
    {u, _} = Random.uniform(Random.key(seed), -2.0, 2.0, shape: shape, type: {:f, 64})
    T.as_type(u, type)
  end

  defp spd(n, seed) do
    a = rand({n, n}, {:f, 64}, seed)
    T.add(T.dot(a, T.transpose(a)), T.multiply(T.eye(n, type: {:f, 64}), n * 1.0))
  end

  defp bits(%T{} = t), do: {t.shape, t.type, T.to_binary(t)}
  defp bits(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> Enum.map(&bits/1)
  defp bits(list) when is_list(list), do: Enum.map(list, &bits/1)
  defp bits(map) when is_map(map), do: Map.new(map, fn {k, v} -> {k, bits(v)} end)
  defp bits(other), do: other

  defp assert_same(fun, args, opts \\ []) do
    jitted = Compiler.jit(fun, opts)
    eager = apply(fun, args)
    # The first call traces, the second replays from the cache.
    first = apply(jitted, args)
    second = apply(jitted, args)
    assert bits(first) == bits(eager)
    assert bits(second) == bits(eager)
    assert %{hits: 1, misses: 1} = Compiler.cache_info(jitted)
  end

  @case_names [
    "unary f32",
    "unary chain",
    "unary f64",
    "unary bf16 and f16",
    "binary arithmetic",
    "binary pow max min",
    "integer ops",
    "comparisons and select",
    "logical",
    "clip and as_type",
    "number literals",
    "reductions",
    "variance logsumexp",
    "dot",
    "dot f64 batched",
    "shape ops",
    "pad concatenate stack",
    "broadcast squeeze tile",
    "put_slice and slice_along_axis",
    "gather take indexed_add",
    "take_along_axis",
    "sort argsort",
    "cumulative",
    "window",
    "conv",
    "fft",
    "rfft irfft",
    "linalg",
    "linalg solve qr",
    "random",
    "creation inside",
    "complex"
  ]

  # One function per op family; each takes the listed arguments.
  defp cases do
    x = rand({3, 4})
    y = rand({3, 4}, {:f, 32}, 2)
    xd = rand({3, 4}, {:f, 64}, 3)
    i = T.as_type(T.multiply(rand({3, 4}, {:f, 32}, 4), 10), {:s, 32})
    j = T.as_type(T.multiply(rand({3, 4}, {:f, 32}, 5), 10), {:s, 32})
    b = T.tensor([[1.0, 2.0], [3.0, 4.0]], type: :bf16)
    h = T.tensor([[1.0, -2.0], [0.5, 4.0]], type: :f16)
    idx = T.tensor([[0], [2], [1]])
    c = T.complex(rand({4}), rand({4}, {:f, 32}, 6))
    img = rand({1, 2, 5, 5})
    ker = rand({3, 2, 3, 3}, {:f, 32}, 7)

    [
      {"unary f32", &T.exp/1, [x]},
      {"unary chain", fn a -> a |> T.sin() |> T.tanh() |> T.sigmoid() |> T.erf() end, [x]},
      {"unary f64", fn a -> T.log1p(T.abs(a)) |> T.sqrt() end, [xd]},
      {"unary bf16 and f16", fn a, b -> {T.exp(a), T.cos(b)} end, [b, h]},
      {"binary arithmetic", fn a, b -> T.divide(T.add(a, b), T.subtract(a, T.multiply(b, 3))) end,
       [x, y]},
      {"binary pow max min", fn a, b -> {T.pow(T.abs(a), b), T.max(a, b), T.min(a, b)} end,
       [x, y]},
      {"integer ops",
       fn a, b ->
         {T.quotient(a, T.add(T.abs(b), 1)), T.remainder(a, 3), T.bitwise_xor(a, b),
          T.left_shift(a, 2)}
       end, [i, j]},
      {"comparisons and select", fn a, b -> T.select(T.greater(a, b), a, b) end, [x, y]},
      {"logical", fn a, b -> T.logical_and(T.less(a, 0), T.greater_equal(b, 0)) end, [x, y]},
      {"clip and as_type", fn a -> T.clip(a, -1.0, 1.0) |> T.as_type(:f64) |> T.as_type(:s16) end,
       [x]},
      {"number literals", fn a -> T.add(T.multiply(a, 2.5), 1) end, [x]},
      {"reductions",
       fn a ->
         {T.sum(a, axes: [1]), T.reduce_max(a), T.mean(a, axes: [0], keep_axes: true),
          T.argmax(a, axis: 1)}
       end, [x]},
      {"variance logsumexp", fn a -> {T.variance(a), T.logsumexp(a, axes: [1])} end, [xd]},
      {"dot", fn a, b -> T.dot(a, T.transpose(b)) end, [x, y]},
      {"dot f64 batched",
       fn a -> T.dot(T.reshape(a, {3, 2, 2}), [2], [0], T.reshape(a, {3, 2, 2}), [1], [0]) end,
       [xd]},
      {"shape ops",
       fn a ->
         a |> T.transpose() |> T.reshape({2, 6}) |> T.slice([0, 1], [2, 4]) |> T.reverse()
       end, [x]},
      {"pad concatenate stack",
       fn a, b ->
         {T.pad(a, 0.0, [{1, 0, 0}, {0, 2, 1}]), T.concatenate([a, b], axis: 1), T.stack([a, b])}
       end, [x, y]},
      {"broadcast squeeze tile",
       fn a ->
         {T.broadcast(T.new_axis(a, 0), {2, 3, 4}), T.squeeze(T.reshape(a, {1, 3, 4})),
          T.tile(a, [2, 1])}
       end, [x]},
      {"put_slice and slice_along_axis",
       fn a, b ->
         {T.put_slice(a, [1, 1], T.slice(b, [0, 0], [2, 2])),
          T.slice_along_axis(a, 1, 2, axis: 1)}
       end, [x, y]},
      {"gather take indexed_add",
       fn a, i ->
         {T.take(a, T.reshape(i, {3}), axis: 0), T.gather(a, T.concatenate([i, i], axis: 1)),
          T.indexed_add(a, T.concatenate([i, i], axis: 1), T.tensor([1.0, 2.0, 3.0]))}
       end, [x, idx]},
      {"take_along_axis", fn a -> T.take_along_axis(a, T.argsort(a, axis: 1), axis: 1) end, [x]},
      {"sort argsort", fn a -> {T.sort(a, axis: 1), T.argsort(a, axis: 0, direction: :desc)} end,
       [x]},
      {"cumulative",
       fn a ->
         {T.cumulative_sum(a, axis: 1), T.cumulative_max(a, axis: 0),
          T.cumulative_product(a, axis: 1, reverse: true)}
       end, [x]},
      {"window", fn a -> {T.window_sum(a, {2, 2}), T.window_max(a, {1, 3}, strides: [1, 2])} end,
       [x]},
      {"conv", fn a, k -> T.conv(a, k, padding: :same) end, [img, ker]},
      {"fft", fn a -> {T.fft(a), T.real(T.ifft(T.fft(a)))} end, [c]},
      {"rfft irfft", fn a -> T.irfft(T.rfft(a)) end, [rand({8})]},
      {"linalg", fn a -> {LinAlg.cholesky(a), LinAlg.determinant(a), LinAlg.invert(a)} end,
       [spd(3, 8)]},
      {"linalg solve qr", fn a, b -> {LinAlg.solve(a, b), elem(LinAlg.qr(a), 0)} end,
       [spd(3, 9), rand({3}, {:f, 64}, 10)]},
      {"random",
       fn k ->
         {elem(Random.uniform(k, shape: {4}), 0), elem(Random.normal(k, shape: {2, 2}), 0)}
       end, [Random.key(42)]},
      {"creation inside",
       fn a ->
         T.add(a, T.iota({3, 4}, axis: 1)) |> T.multiply(T.eye(4) |> T.slice([0, 0], [3, 4]))
       end, [x]},
      {"complex", fn a -> {T.multiply(a, T.conjugate(a)), T.abs(a)} end, [c]}
    ]
  end

  describe "replay is bit-identical to eager evaluation" do
    for name <- @case_names do
      test name do
        {_, fun, args} = Enum.find(cases(), fn {n, _, _} -> n == unquote(name) end)
        assert_same(fun, args)
      end
    end

    test "every case has a test" do
      assert Enum.map(cases(), &elem(&1, 0)) == @case_names
    end

    test "strided arguments (a transposed and a sliced view)" do
      base = rand({4, 3})
      fun = fn a -> T.sum(T.multiply(T.slice(a, [0, 1], [3, 2]), 2.0), axes: [0]) end
      jitted = Compiler.jit(fun)
      contiguous = rand({3, 4}, {:f, 32}, 9)
      assert bits(jitted.(contiguous)) == bits(fun.(contiguous))

      for view <- [T.transpose(base), T.slice(rand({5, 4}), [1, 0], [3, 4])] do
        assert T.to_list(jitted.(view)) == T.to_list(fun.(view))
      end
    end
  end

  describe "arguments and results" do
    test "containers: tuples, maps, lists, nested, with constants" do
      fun = fn %{a: a, b: {b, [c, scale]}} ->
        %{sum: T.add(a, T.multiply(b, scale)), list: [c, T.negate(c)], tag: :done}
      end

      jitted = Compiler.jit(fun)
      args = %{a: rand({2}), b: {rand({2}, {:f, 32}, 2), [rand({3}, {:f, 32}, 3), 3.0]}}
      result = jitted.(args)
      assert result.tag == :done
      assert bits(result) == bits(fun.(args))
      # A new number is a new signature: traced again.
      args2 = put_in(args, [:b], {elem(args.b, 0), [rand({3}), 4.0]})
      assert bits(jitted.(args2)) == bits(fun.(args2))
      assert %{misses: 2, hits: 0} = Compiler.cache_info(jitted)
    end

    test "closures capture weights by reference" do
      # Evaluated weights are captured; lazy ones would be recomputed by
      # each run (their graph is part of the program).
      w = rand({4, 2})
      _ = T.to_binary(w)
      bias = T.tensor([1.0, -1.0])
      fun = fn x -> T.add(T.dot(x, w), bias) |> T.tanh() end
      jitted = Compiler.jit(fun)

      for seed <- 1..3 do
        x = rand({3, 4}, {:f, 32}, seed)
        assert bits(jitted.(x)) == bits(fun.(x))
      end

      stats = Compiler.program_stats(jitted, [rand({3, 4})])
      assert stats.constants == 2
      assert stats.inputs == 1
    end

    test "an output may be an input or a captured constant" do
      c = T.tensor([7, 8])
      jitted = Compiler.jit(fn a, b -> {a, c, T.add(a, b)} end)
      a = T.tensor([1, 2])
      {a_out, c_out, sum} = jitted.(a, T.tensor([3, 4]))
      assert T.to_list(a_out) == [1, 2]
      assert T.to_list(c_out) == [7, 8]
      assert T.to_list(sum) == [4, 6]
    end

    test "results are lazy until read" do
      jitted = Compiler.jit(&T.exp/1)
      out = jitted.(T.tensor([0.0]))
      refute Emily.Native.is_evaluated(out.ref)
      assert T.to_list(out) == [1.0]
    end

    test "common subexpressions are merged" do
      jitted = Compiler.jit(fn x -> T.add(T.exp(x), T.exp(x)) end)
      stats = Compiler.program_stats(jitted, [T.tensor([1.0, 2.0])])
      assert stats.cse_merged == 1
      assert stats.nodes_after == stats.nodes_before - 1
      assert stats.fused_kernels == 0
    end

    test "fuse: true fuses elementwise chains bit-identically, in every float type" do
      chain = fn x, y ->
        x
        |> T.multiply(y)
        |> T.add(1.5)
        |> T.exp()
        |> T.negate()
        |> T.tanh()
        |> T.subtract(x)
        |> T.divide(T.add(T.abs(y), 1.0))
      end

      for type <- [{:f, 32}, {:f, 64}, {:bf, 16}, {:f, 16}] do
        args = [rand({64, 33}, type, 1), rand({33}, type, 2)]
        assert_same(chain, args, fuse: true)
        stats = Compiler.program_stats(Compiler.jit(chain, fuse: true), args)
        # The {33}-shaped divisor is a group of its own (another shape).
        assert stats.fused_kernels in 1..2
        assert stats.nodes_after <= stats.nodes_before - 6
      end
    end

    test "fuse: true fuses softmax and layer norm within the stated reduction bound" do
      softmax = fn x ->
        e = T.exp(T.subtract(x, T.reduce_max(x, axes: [-1], keep_axes: true)))
        T.divide(e, T.sum(e, axes: [-1], keep_axes: true))
      end

      layer_norm = fn x ->
        mean = T.mean(x, axes: [-1], keep_axes: true)
        centered = T.subtract(x, mean)
        var = T.mean(T.multiply(centered, centered), axes: [-1], keep_axes: true)
        T.multiply(centered, T.rsqrt(T.add(var, 1.0e-5)))
      end

      x = rand({37, 300})

      for fun <- [softmax, layer_norm] do
        jitted = Compiler.jit(fun, fuse: true)
        assert Compiler.program_stats(jitted, [x]).fused_kernels >= 1
        fused = T.to_flat_list(jitted.(x))
        eager = T.to_flat_list(fun.(x))
        # Row reductions may reassociate: n * eps relative to the row's scale.
        for {a, b} <- Enum.zip(fused, eager), do: assert_in_delta(a, b, 300 * 1.2e-7 * 4)
      end
    end

    test "a jitted function called while tracing another" do
      inner = Compiler.jit(fn a -> T.multiply(T.exp(a), 2.0) end)
      outer_fun = fn a, b -> T.add(inner.(a), b) end
      assert_same(outer_fun, [rand({3}), rand({3}, {:f, 32}, 2)])
    end

    test "functions of several arities" do
      assert T.to_number(Compiler.jit(fn -> T.tensor(3.0) |> T.exp() end).()) ==
               T.to_number(T.exp(T.tensor(3.0)))

      f5 = Compiler.jit(fn a, b, c, d, e -> Enum.reduce([b, c, d, e], a, &T.add/2) end)

      assert T.to_number(f5.(T.tensor(1), T.tensor(2), T.tensor(3), T.tensor(4), T.tensor(5))) ==
               15
    end
  end

  describe "cache" do
    test "new shapes and types trace anew; repeated signatures hit" do
      jitted = Compiler.jit(&T.negate/1)
      jitted.(T.tensor([1.0]))
      jitted.(T.tensor([2.0]))
      jitted.(T.tensor([1.0, 2.0]))
      jitted.(T.tensor([1, 2]))
      jitted.(T.tensor([5, 6]))

      assert Compiler.cache_info(jitted) == %{
               hits: 2,
               misses: 3,
               evictions: 0,
               entries: 3,
               size: 64
             }
    end

    test "least recently used programs are evicted" do
      jitted = Compiler.jit(&T.negate/1, cache_size: 2)
      a = T.tensor([1.0])
      b = T.tensor([1.0, 2.0])
      c = T.tensor([1.0, 2.0, 3.0])
      jitted.(a)
      jitted.(b)
      jitted.(a)
      # c evicts b, the least recently used
      jitted.(c)
      assert %{evictions: 1, entries: 2, misses: 3, hits: 1} = Compiler.cache_info(jitted)
      jitted.(a)
      assert %{misses: 3, hits: 2} = Compiler.cache_info(jitted)
      assert T.to_list(jitted.(b)) == [-1.0, -2.0]
      assert %{misses: 4, evictions: 2, entries: 2} = Compiler.cache_info(jitted)
    end

    test "works from other processes" do
      jitted = Compiler.jit(&T.exp/1)
      x = T.tensor([0.0, 1.0])

      results =
        1..4
        |> Enum.map(fn _ -> Task.async(fn -> T.to_list(jitted.(x)) end) end)
        |> Enum.map(&Task.await/1)

      assert Enum.uniq(results) == [T.to_list(T.exp(x))]
      assert %{hits: hits, misses: misses} = Compiler.cache_info(jitted)
      assert hits + misses == 4
    end

    test "clear_cache drops programs" do
      jitted = Compiler.jit(&T.exp/1)
      jitted.(T.tensor([0.0]))
      assert :ok = Compiler.clear_cache(jitted)
      assert %{entries: 0, misses: 0} = Compiler.cache_info(jitted)
      assert T.to_list(jitted.(T.tensor([0.0]))) == [1.0]
    end
  end

  describe "errors" do
    test "reading a traced tensor raises" do
      for read <- [&T.to_number/1, &T.to_binary/1, &T.to_flat_list/1, &Emily.eval(&1.ref)] do
        jitted = Compiler.jit(fn x -> read.(T.sum(x)) end)

        assert_raise ArgumentError,
                     ~r/cannot read a traced tensor inside Emily.Tensor.Compiler.jit/,
                     fn ->
                       jitted.(T.tensor([1.0, 2.0]))
                     end
      end
    end

    test "a failed trace leaves the function usable" do
      jitted = Compiler.jit(fn x, flag -> if flag, do: T.to_number(x), else: T.exp(x) end)
      assert_raise ArgumentError, fn -> jitted.(T.tensor(1.0), true) end
      assert T.to_number(jitted.(T.tensor(0.0), false)) == 1.0
      refute Compiler.tracing?()
    end

    test "bad options and arguments" do
      assert_raise ArgumentError, ~r/unknown keys/, fn -> Compiler.jit(&T.exp/1, bogus: 1) end
      assert_raise ArgumentError, ~r/cache_size/, fn -> Compiler.jit(&T.exp/1, cache_size: 0) end
      assert_raise ArgumentError, ~r/fuse/, fn -> Compiler.jit(&T.exp/1, fuse: :yes) end

      assert_raise ArgumentError, ~r/made by Emily.Tensor.Compiler.jit/, fn ->
        Compiler.cache_info(&T.exp/1)
      end
    end

    test "array_devices: :cpu for CPU tensors, an error for anything else" do
      t = T.tensor([1.0])
      assert Emily.Native.array_devices([t.ref, t.ref]) == :cpu
      assert Emily.Native.array_devices([]) == :cpu

      assert_raise ArgumentError, ~r/array_devices: argument tensors must be a list/, fn ->
        Emily.Native.array_devices(:nope)
      end

      assert_raise ArgumentError, ~r/array_devices/, fn ->
        Emily.Native.array_devices([t.ref, 7])
      end
    end

    test "placeholders on an unknown device raise" do
      assert_raise ArgumentError, ~r/placeholder: device 99: unknown device 99/, fn ->
        Emily.Native.placeholder({:f, 32}, [2], 99)
      end
    end

    test "the engine checks replay inputs" do
      ph = Emily.Native.placeholder({:f, 32}, [2, 3], 0)
      out = Emily.Native.exp(ph)
      program = Emily.Native.program_new([ph], [out], false, false)

      assert_raise ArgumentError, ~r/input 0: expected f32\[2,3\], got f64\[2,3\]/, fn ->
        Emily.Native.program_run(program, [T.iota({2, 3}, type: :f64).ref])
      end

      assert_raise ArgumentError, ~r/input 0: expected f32\[2,3\], got f32\[3\]/, fn ->
        Emily.Native.program_run(program, [T.iota({3}, type: :f32).ref])
      end

      assert_raise ArgumentError, ~r/expected 1 inputs, got 0/, fn ->
        Emily.Native.program_run(program, [])
      end

      assert_raise ArgumentError, ~r/must be an Emily program/, fn ->
        Emily.Native.program_run(out, [])
      end

      assert_raise ArgumentError, ~r/input 0 \(f32\[2,3\]\) is not a placeholder/, fn ->
        Emily.Native.program_new([out], [out], false, false)
      end

      assert_raise ArgumentError,
                   ~r/while: the condition takes 1 inputs and gives 1 outputs, expected 2/,
                   fn ->
                     Emily.Native.while_loop(program, program, [out, out])
                   end

      assert_raise ArgumentError, ~r/while: the condition must give one element/, fn ->
        Emily.Native.while_loop(program, program, [out])
      end
    end
  end

  describe "while" do
    defp doubling(limit) do
      Compiler.while(
        {0, T.tensor([1.0, 2.0])},
        fn {i, _} -> T.less(i, limit) end,
        fn {i, x} -> {T.add(i, 1), T.multiply(x, 2)} end
      )
    end

    test "eager loop" do
      {i, x} = doubling(3)
      assert T.to_number(i) == 3
      assert T.to_list(x) == [8.0, 16.0]
    end

    test "traced loop with a data-dependent trip count" do
      jitted =
        Compiler.jit(fn limit, x ->
          Compiler.while({0, x}, fn {i, _} -> T.less(i, limit) end, fn {i, x} ->
            {T.add(i, 1), T.multiply(x, 2)}
          end)
        end)

      for n <- [0, 1, 4] do
        {i, x} = jitted.(T.tensor(n), T.tensor([1.0, 3.0]))
        {ei, ex} = doubling(n)
        assert T.to_number(i) == T.to_number(ei)
        assert T.to_list(x) == Enum.map([1.0, 3.0], &(&1 * :math.pow(2, n)))
        assert T.to_number(i) == n
        assert is_list(T.to_list(ex))
      end

      assert %{misses: 1, hits: 2} = Compiler.cache_info(jitted)
    end

    test "traced loop is bit-identical to the eager loop" do
      fun = fn x ->
        Compiler.while(%{x: x, n: 0}, fn %{n: n} -> T.less(n, 5) end, fn %{x: x, n: n} ->
          %{x: T.add(T.sin(x), T.multiply(x, 0.5)), n: T.add(n, 1)}
        end)
      end

      assert_same(fun, [rand({6})])
    end

    test "nested loops and closed-over values" do
      fun = fn x, k ->
        Compiler.while({0, x}, fn {i, _} -> T.less(i, 3) end, fn {i, x} ->
          {_, inner} =
            Compiler.while({0, x}, fn {j, _} -> T.less(j, k) end, fn {j, y} ->
              {T.add(j, 1), T.add(y, k)}
            end)

          {T.add(i, 1), inner}
        end)
      end

      assert_same(fun, [T.tensor([1.0, 2.0]), T.tensor(2.0)])
      {_, x} = Compiler.jit(fun).(T.tensor([1.0, 2.0]), T.tensor(2.0))
      assert T.to_list(x) == [13.0, 14.0]
    end

    test "the body must keep the state's shapes and types" do
      assert_raise ArgumentError, ~r/the body must return the state's structure/, fn ->
        Compiler.while(T.tensor([1.0]), fn _ -> true end, fn x -> T.concatenate([x, x]) end)
      end

      jitted =
        Compiler.jit(fn x ->
          Compiler.while(x, fn _ -> T.tensor(1) end, fn x -> T.as_type(x, :f64) end)
        end)

      assert_raise ArgumentError, ~r/the body must return the state's structure/, fn ->
        jitted.(T.tensor([1.0]))
      end
    end

    test "the condition must be a scalar" do
      assert_raise ArgumentError, ~r/must be a scalar/, fn ->
        Compiler.while(T.tensor([1.0, 2.0]), fn x -> T.greater(x, 0) end, & &1)
      end
    end
  end

  describe "telemetry" do
    setup context do
      id = {__MODULE__, context.test}
      on_exit(fn -> Emily.Telemetry.detach(id) end)
      pid = self()

      :ok =
        Emily.Telemetry.attach_many(
          id,
          [
            [:emily, :compiler, :trace],
            [:emily, :program, :run, :start],
            [:emily, :program, :run, :stop]
          ],
          fn event, measurements, metadata, _ ->
            send(pid, {:event, event, measurements, metadata})
          end,
          nil
        )

      :ok
    end

    test "a trace event per program and a span per run" do
      jitted = Compiler.jit(fn x -> T.add(T.exp(x), T.exp(x)) end)
      jitted.(T.tensor([1.0]))
      jitted.(T.tensor([2.0]))

      assert_received {:event, [:emily, :compiler, :trace], %{duration: d}, meta}
      assert is_integer(d) and d >= 0

      assert %{
               nodes_before: 3,
               nodes_after: 2,
               fused_kernels: 0,
               signature: {:list, [{:t, {1}, {:f, 32}}]}
             } = meta

      assert_received {:event, [:emily, :program, :run, :start], _, _}
      assert_received {:event, [:emily, :program, :run, :stop], %{duration: _}, _}
      assert_received {:event, [:emily, :program, :run, :stop], _, _}
      refute_received {:event, [:emily, :compiler, :trace], _, _}
    end
  end
end
