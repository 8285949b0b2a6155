defmodule Emily.FastTest do
  use ExUnit.Case, async: true

  alias Emily.Fast

  doctest Emily.Fast

  @tols %{{:f, 32} => 1.0e-5, {:bf, 16} => 2.0e-2, {:f, 16} => 3.0e-3, {:f, 64} => 1.0e-9}

  # Deterministic, varied values (no RNG state to thread).
  defp values(shape, type, scale \\ 2.0, phase \\ 0.0) do
    Nx.iota(shape, type: :f64, backend: Nx.BinaryBackend)
    |> Nx.multiply(0.731)
    |> Nx.add(phase)
    |> Nx.sin()
    |> Nx.multiply(scale)
    |> Nx.as_type(type)
  end

  defp emily(t), do: Nx.backend_transfer(t, Emily.Backend)
  defp binary(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

  defp assert_close(got, want, type) do
    tol = Map.fetch!(@tols, type)
    got = got |> binary() |> Nx.as_type(:f64)
    want = want |> binary() |> Nx.as_type(:f64)
    assert got.shape == want.shape

    assert Nx.all_close(got, want, atol: tol, rtol: tol) |> Nx.to_number() == 1,
           "got #{inspect(got)}\nwant #{inspect(want)}"
  end

  # f(inputs) on Emily (the native kernel) against f on Nx.BinaryBackend (the fallback).
  defp check_native(f, inputs, type) do
    native = apply(f, Enum.map(inputs, &emily/1))
    fallback = apply(f, Enum.map(inputs, &binary/1))
    assert native.type == fallback.type
    assert %Emily.Backend{} = native.data
    assert_close(native, fallback, type)
    native
  end

  describe "native kernels against the composed fallback" do
    for type <- [{:f, 32}, {:bf, 16}, {:f, 16}, {:f, 64}] do
      @type_ type

      test "rms_norm #{inspect(type)}" do
        x = values({3, 5, 67}, @type_)
        w = values({67}, @type_, 0.5, 1.0) |> Nx.add(1)
        y = check_native(&Fast.rms_norm(&1, &2, eps: 1.0e-5), [x, w], @type_)
        assert y.type == @type_
        check_native(&Fast.rms_norm(&1, nil), [x], @type_)
      end

      test "layer_norm #{inspect(type)}" do
        x = values({4, 33}, @type_, 3.0) |> Nx.add(1)
        w = values({33}, @type_, 0.5, 1.0) |> Nx.add(1)
        b = values({33}, @type_, 0.3, 2.0)
        check_native(&Fast.layer_norm(&1, &2, &3), [x, w, b], @type_)
        check_native(&Fast.layer_norm(&1, &2, nil, eps: 1.0e-3), [x, w], @type_)
        check_native(&Fast.layer_norm(&1, nil, &2), [x, b], @type_)
        check_native(&Fast.layer_norm(&1, nil, nil), [x], @type_)
      end

      test "softmax #{inspect(type)}" do
        x = values({2, 3, 130}, @type_, 6.0)
        check_native(&Fast.softmax/1, [x], @type_)
        check_native(&Fast.softmax(&1, axis: 1), [x], @type_)
      end

      test "rope and rope_with_freqs #{inspect(type)}" do
        x = values({2, 3, 5, 16}, @type_)

        for traditional <- [false, true], dims <- [16, 8] do
          check_native(&Fast.rope(&1, 7, dims: dims, traditional: traditional), [x], @type_)

          check_native(
            &Fast.rope(&1, &2, dims: dims, traditional: traditional, base: 500.0, scale: 0.5),
            [x, Nx.tensor(3)],
            @type_
          )

          freqs = Nx.tensor(Enum.map(0..(div(dims, 2) - 1), &(3.0 + &1 * 40.0)), type: :f32)

          check_native(
            &Fast.rope_with_freqs(&1, 11, &2, dims: dims, traditional: traditional),
            [x, freqs],
            @type_
          )
        end
      end
    end

    test "the native result is the engine kernel's, bit for bit" do
      x = values({4, 64}, {:f, 32}) |> emily()
      w = values({64}, {:f, 32}, 1.0, 0.5) |> emily()
      ref = Emily.Native.fast_rms_norm(x.data.ref, w.data.ref, 1.0e-6)
      direct = Emily.to_binary(ref)
      assert Nx.to_binary(Fast.rms_norm(x, w)) == direct
    end

    test "integer inputs normalise as f32; the type merges with the weight's" do
      x = Nx.iota({2, 4}, backend: Emily.Backend)
      assert Fast.rms_norm(x, nil).type == {:f, 32}
      assert Fast.softmax(x).type == {:f, 32}
      xb = values({2, 4}, {:bf, 16}) |> emily()
      w = Nx.tensor([1.0, 2.0, 3.0, 4.0], backend: Emily.Backend)
      y = Fast.rms_norm(xb, w)
      assert y.type == {:f, 32}
      assert_close(y, Fast.rms_norm(binary(xb), binary(w)), {:f, 32})
    end

    test "rope_with_freqs with freqs = base^(2i/dims) is rope with base" do
      x = values({1, 2, 6, 8}, {:f, 32}) |> emily()
      freqs = Nx.pow(10_000.0, Nx.divide(Nx.multiply(Nx.iota({4}), 2), 8))
      assert_close(Fast.rope_with_freqs(x, 4, freqs, dims: 8), Fast.rope(x, 4, dims: 8), {:f, 32})
    end

    test "vectorized inputs and named axes" do
      x = values({3, 2, 8}, {:f, 32}) |> emily()
      v = Nx.vectorize(x, :batch)
      y = Fast.softmax(v)
      assert y.vectorized_axes == [batch: 3]
      assert_close(Nx.devectorize(y, keep_names: false), Fast.softmax(x), {:f, 32})
      named = Nx.rename(x, [:a, :b, :c])
      assert_close(Fast.softmax(named, axis: :b), Fast.softmax(x, axis: 1), {:f, 32})

      assert_close(
        Nx.devectorize(Fast.rms_norm(v, nil), keep_names: false),
        Fast.rms_norm(x, nil),
        {:f, 32}
      )
    end
  end

  describe "under Emily.Compiler" do
    test "every kernel matches eager evaluation" do
      x = values({2, 2, 4, 8}, {:f, 32}) |> emily()
      w = values({8}, {:f, 32}, 0.5, 1.0) |> emily()

      f = fn x, w, offset ->
        {Fast.rms_norm(x, w), Fast.layer_norm(x, w, w), Fast.softmax(x, axis: 2),
         Fast.rope(x, offset, dims: 8),
         Fast.rope_with_freqs(x, offset, Nx.add(Nx.slice(w, [0], [2]), 2.0),
           dims: 4,
           traditional: true
         )}
      end

      jit = Nx.Defn.jit(f, compiler: Emily.Compiler)

      for offset <- [0, 5, 1000] do
        compiled = jit.(x, w, Nx.tensor(offset))
        eager = f.(x, w, Nx.tensor(offset))

        for {c, e} <- Enum.zip(Tuple.to_list(compiled), Tuple.to_list(eager)) do
          assert_close(c, e, {:f, 32})
        end
      end

      # the offset is an input: a new value changes the result
      assert Nx.to_binary(elem(jit.(x, w, Nx.tensor(1)), 3)) !=
               Nx.to_binary(elem(jit.(x, w, Nx.tensor(2)), 3))
    end
  end

  describe "gradients" do
    defp loss_fns do
      c = values({3, 8}, {:f, 32}, 1.0, 0.3)

      [
        rms_norm: fn x, w, _b -> Nx.sum(Nx.multiply(Fast.rms_norm(x, w), c)) end,
        rms_norm_no_weight: fn x, _w, _b -> Nx.sum(Nx.multiply(Fast.rms_norm(x, nil), c)) end,
        layer_norm: fn x, w, b -> Nx.sum(Nx.multiply(Fast.layer_norm(x, w, b), c)) end,
        softmax: fn x, _w, _b -> Nx.sum(Nx.multiply(Fast.softmax(x), c)) end,
        softmax_axis0: fn x, _w, _b -> Nx.sum(Nx.multiply(Fast.softmax(x, axis: 0), c)) end,
        rope: fn x, _w, _b ->
          y = Fast.rope(Nx.reshape(x, {1, 3, 8}), 3, dims: 6, base: 100.0)
          Nx.sum(Nx.multiply(Nx.reshape(y, {3, 8}), c))
        end,
        rope_traditional: fn x, w, _b ->
          y =
            Fast.rope_with_freqs(Nx.reshape(x, {1, 3, 8}), 2, Nx.add(Nx.slice(w, [0], [4]), 2.0),
              dims: 8,
              traditional: true
            )

          Nx.sum(Nx.multiply(Nx.reshape(y, {3, 8}), c))
        end
      ]
    end

    test "grad under Emily.Compiler matches the fallback's grad on Nx.BinaryBackend" do
      x = values({3, 8}, {:f, 32})
      w = values({8}, {:f, 32}, 0.5, 1.0) |> Nx.add(1)
      b = values({8}, {:f, 32}, 0.3, 2.0)

      for {name, f} <- loss_fns() do
        grad = fn x, w, b -> Nx.Defn.grad({x, w, b}, fn {x, w, b} -> f.(x, w, b) end) end
        {gx, gw, gb} = Nx.Defn.jit(grad, compiler: Emily.Compiler).(emily(x), emily(w), emily(b))
        {rx, rw, rb} = Nx.Defn.jit(grad, compiler: Nx.Defn.Evaluator).(x, w, b)

        for {g, r} <- [{gx, rx}, {gw, rw}, {gb, rb}] do
          assert %Emily.Backend{} = g.data, "#{name}"
          assert_close(g, r, {:f, 32})
        end
      end
    end

    test "grad matches central finite differences (f64)" do
      x = values({3, 8}, {:f, 64}) |> emily()
      w = values({8}, {:f, 64}, 0.5, 1.0) |> Nx.add(1) |> emily()
      c = values({3, 8}, {:f, 64}, 1.0, 0.3) |> emily()

      loss3 = fn x, w, c ->
        Nx.sum(Nx.multiply(Fast.layer_norm(Fast.rms_norm(x, w), w, nil), c))
      end

      loss = fn x -> loss3.(x, w, c) end
      grad = fn x, w, c -> Nx.Defn.grad(x, &loss3.(&1, w, c)) end
      g = Nx.Defn.jit(grad, compiler: Emily.Compiler).(x, w, c) |> Nx.to_flat_list()
      h = 1.0e-6
      flat = Nx.to_flat_list(x)

      for {_, j} <- Enum.with_index(flat), rem(j, 5) == 0 do
        at = fn d ->
          flat
          |> List.update_at(j, &(&1 + d))
          |> Nx.tensor(type: :f64)
          |> Nx.reshape({3, 8})
          |> emily()
        end

        fd = (Nx.to_number(loss.(at.(h))) - Nx.to_number(loss.(at.(-h)))) / (2 * h)
        assert_in_delta Enum.at(g, j), fd, 1.0e-6 * (1 + abs(fd))
      end
    end
  end

  describe "bad input" do
    setup do
      {:ok, x: values({2, 4}, {:f, 32}) |> emily()}
    end

    test "weight and bias shapes", %{x: x} do
      assert_raise ArgumentError, ~r/weight must have shape \{4\}/, fn ->
        Fast.rms_norm(x, Nx.iota({3}))
      end

      assert_raise ArgumentError, ~r/bias must have shape \{4\}/, fn ->
        Fast.layer_norm(x, nil, Nx.iota({2, 4}))
      end
    end

    test "options", %{x: x} do
      assert_raise ArgumentError, ~r/:eps must be a number/, fn ->
        Fast.rms_norm(x, nil, eps: :big)
      end

      assert_raise ArgumentError, fn -> Fast.softmax(x, axis: 2) end
      assert_raise ArgumentError, fn -> Fast.softmax(x, bogus: 1) end
    end

    test "rope", %{x: x} do
      x4 = Nx.reshape(x, {1, 1, 2, 4})

      assert_raise ArgumentError, ~r/:dims must be an even integer in 2..4/, fn ->
        Fast.rope(x4, 0, dims: 3)
      end

      assert_raise ArgumentError, ~r/:dims must be an even integer/, fn ->
        Fast.rope(x4, 0, dims: 6)
      end

      assert_raise ArgumentError, ~r/:dims must be an even integer/, fn ->
        Fast.rope(x4, 0, [])
      end

      assert_raise ArgumentError, ~r/offset must be an integer/, fn ->
        Fast.rope(x4, 1.5, dims: 4)
      end

      assert_raise ArgumentError, ~r/offset must be an integer/, fn ->
        Fast.rope(x4, Nx.tensor([1, 2]), dims: 4)
      end

      assert_raise ArgumentError, ~r/rank >= 2/, fn ->
        Fast.rope(Nx.iota({4}, type: :f32), 0, dims: 4)
      end

      assert_raise ArgumentError, ~r/freqs must have shape \{2\}/, fn ->
        Fast.rope_with_freqs(x4, 0, Nx.iota({4}), dims: 4)
      end
    end

    test "the engine validates what reaches it directly", %{x: x} do
      assert_raise ArgumentError, ~r/rms_norm: weight f32\[3\]/, fn ->
        Emily.Native.fast_rms_norm(
          x.data.ref,
          Nx.iota({3}, type: :f32, backend: Emily.Backend).data.ref,
          1.0e-6
        )
      end

      assert_raise ArgumentError, ~r/rope: offset f32\[\]/, fn ->
        off = Nx.tensor(1.0, backend: Emily.Backend).data.ref

        Emily.Native.fast_rope(
          Nx.reshape(x, {1, 2, 4}).data.ref,
          off,
          nil,
          4,
          false,
          10_000.0,
          1.0
        )
      end
    end
  end
end
