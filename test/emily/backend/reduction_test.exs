defmodule Emily.Backend.ReductionTest do
  use ExUnit.Case, async: true

  import EmilyTest.Helpers, only: [wrap: 1]

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  alias Emily.Native

  defp t(list, opts \\ []), do: Nx.tensor(list, opts)

  # to_list for tensors, to_number for scalars (Nx's to_list refuses scalars).
  defp val(%Nx.Tensor{shape: {}} = x), do: Nx.to_number(x)
  defp val(x), do: Nx.to_list(x)

  # ---------------------------------------------------------------------------
  # Nx's documented examples
  # ---------------------------------------------------------------------------

  # ---------------------------------------------------------------------------
  # Types, options and errors
  # ---------------------------------------------------------------------------

  describe "types" do
    test "sum and product use the aggregate type" do
      for {type, out} <- [
            {:u8, {:u, 32}},
            {:u16, {:u, 32}},
            {:u32, {:u, 32}},
            {:u64, {:s, 64}},
            {:s8, {:s, 32}},
            {:s16, {:s, 32}},
            {:s32, {:s, 32}},
            {:s64, {:s, 64}},
            {:f16, {:f, 16}},
            {:bf16, {:bf, 16}},
            {:f32, {:f, 32}},
            {:f64, {:f, 64}},
            {:c64, {:c, 64}}
          ] do
        x = t([1, 2, 3], type: type)
        assert Nx.type(Nx.sum(x)) == out
        assert Nx.type(Nx.product(x)) == out
        assert val(Nx.sum(x)) in [6, 6.0, %Complex{re: 6.0, im: 0.0}]
      end

      # u8 sums past 255 without wrapping.
      assert val(Nx.sum(t([200, 200, 200], type: :u8))) == 600
      # s32 wraps.
      assert val(Nx.sum(t([2_147_483_647, 1]))) == -2_147_483_648
    end

    test "max/min/median/mode/sort keep the type; mean and friends are float" do
      for type <- [:u8, :s16, :s64, :f16, :bf16, :f64] do
        x = t([[3, 1, 2], [2, 2, 9]], type: type)
        tt = Nx.type(x)
        assert Nx.type(Nx.reduce_max(x)) == tt
        assert Nx.type(Nx.reduce_min(x, axes: [0])) == tt
        assert Nx.type(Nx.median(x, axis: 1)) == tt
        assert Nx.type(Nx.mode(x, axis: 1)) == tt
        assert Nx.type(Nx.sort(x, axis: 1)) == tt
        float = if tt in [{:f, 16}, {:bf, 16}, {:f, 64}], do: tt, else: {:f, 32}
        assert Nx.type(Nx.mean(x)) == float
        assert Nx.type(Nx.variance(x)) == float
        assert Nx.type(Nx.standard_deviation(x)) == float
        assert Nx.type(Nx.logsumexp(x)) == float
        assert Nx.type(Nx.all(x)) == {:u, 8}
        assert Nx.type(Nx.any(x)) == {:u, 8}
        assert Nx.type(Nx.argsort(x, type: :s64)) == {:s, 64}
        assert Nx.type(Nx.argmax(x, type: :u8)) == {:u, 8}
      end
    end

    test "axes: [] only converts the type" do
      x = t([0.5, 2.0])
      assert val(Nx.sum(x, axes: [])) == [0.5, 2.0]
      assert val(Nx.all(x, axes: [])) == [0, 2]
      assert Nx.type(Nx.sum(t([1, 2], type: :u8), axes: [])) == {:u, 32}
      assert val(Nx.mean(t([1, 2]), axes: [])) == [1.0, 2.0]
    end

    test "complex inputs" do
      z = t([Complex.new(1.0, 2.0), Complex.new(3.0, -1.0)])
      assert val(Nx.sum(z)) == Complex.new(4.0, 1.0)
      assert val(Nx.mean(z)) == Complex.new(2.0, 0.5)
      # variance of complex numbers is real: mean |z - mean|^2 = 3.25

      for fun <- [
            &Nx.reduce_max/1,
            &Nx.reduce_min/1,
            &Nx.argmax/1,
            &Nx.argmin/1,
            &Nx.sort/1,
            &Nx.argsort/1,
            &Nx.median/1,
            &Nx.mode/1,
            &Nx.logsumexp/1
          ] do
        assert_raise ArgumentError, ~r/does not support complex inputs/, fn -> fun.(z) end
      end
    end
  end

  # ---------------------------------------------------------------------------
  # Edge values
  # ---------------------------------------------------------------------------

  describe "edge values" do
    test "NaN propagates through sums, means and max/min" do
      x = t([[1.0, :nan], [3.0, 4.0]])
      assert val(Nx.sum(x, axes: [1])) == [:nan, 7.0]
      assert val(Nx.reduce_max(x, axes: [1])) == [:nan, 4.0]
      assert val(Nx.reduce_min(x, axes: [0])) == [1.0, :nan]
      assert val(Nx.mean(x, axes: [1])) == [:nan, 3.5]
      assert val(Nx.variance(x, axes: [1])) == [:nan, 0.25]
      assert val(Nx.logsumexp(x, axes: [1])) |> hd() == :nan
      assert val(Nx.argmax(x, axis: 1)) == [1, 1]
      assert val(Nx.argmin(x, axis: 0)) == [0, 0]
      # NaN sorts last, so the median ignores it when it is not in the middle.
      assert val(Nx.median(t([:nan, 1.0, 2.0]))) == 2.0
      assert val(Nx.median(t([:nan, 1.0, 2.0, 3.0]))) == 2.5
    end

    test "logsumexp with infinities" do
      assert val(Nx.logsumexp(t([:neg_infinity, :neg_infinity]))) == :neg_infinity
      assert val(Nx.logsumexp(t([1.0, :infinity]))) == :infinity
      assert_in_delta Nx.to_number(Nx.logsumexp(t([1000.0, 1000.0]))), 1000.6931, 1.0e-3
      assert_in_delta Nx.to_number(Nx.logsumexp(t([-1000.0, :neg_infinity]))), -1000.0, 1.0e-3

      assert_in_delta Nx.to_number(Nx.logsumexp(t([1, 2, 3, 4, 5, 6]), exp_scaling_factor: 0.5)),
                      :math.log(0.5) + 6.45619344,
                      1.0e-5

      k = Nx.logsumexp(t([[0.0, 0.0], [1.0, 1.0]]), axes: [1], keep_axes: true)
      assert Nx.shape(k) == {2, 1}
    end

    test "ties" do
      assert val(Nx.argmax(t([1, 3, 3, 2]))) == 1
      assert val(Nx.argmax(t([1, 3, 3, 2]), tie_break: :high)) == 2
      assert val(Nx.argmin(t([[0, 0], [0, 0]]), tie_break: :high)) == 3
      # mode ties go to the smallest value; NaNs never tie with each other.
      assert val(Nx.mode(t([5, 5, 1, 1, 3]))) == 1
      assert val(Nx.mode(t([[2, 9, 9, 2], [7, 7, 3, 3]]), axis: 1)) == [2, 3]
      assert val(Nx.mode(t([:nan, :nan, 2.0, 1.0]))) == 1.0
      assert val(Nx.mode(t([-0.0, 0.0, 1.0]))) == -0.0
    end

    test "min/max on extreme integers and unsigned types" do
      assert val(Nx.reduce_min(t([0, 255, 7], type: :u8))) == 0
      assert val(Nx.reduce_max(t([-9_223_372_036_854_775_808, 5], type: :s64))) == 5
      assert val(Nx.argmax(t([0, 18_446_744_073_709_551_615], type: :u64))) == 1
      assert val(Nx.sort(t([3, 0, 255, 128], type: :u8))) == [0, 3, 128, 255]
    end

    test "zero-size axes reduce to the identity" do
      e = wrap(Native.from_binary(<<>>, [2, 0], {:f, 32}))
      assert val(Nx.sum(e, axes: [1])) == [0.0, 0.0]
      assert val(Nx.product(e, axes: [1])) == [1.0, 1.0]
      assert val(Nx.reduce_max(e, axes: [1])) == [:neg_infinity, :neg_infinity]
      assert val(Nx.all(e, axes: [1])) == [1, 1]
      assert val(Nx.any(e, axes: [1])) == [0, 0]
      assert Nx.shape(Nx.sort(e, axis: 1)) == {2, 0}
    end
  end

  # ---------------------------------------------------------------------------
  # Sorting: stability, NaN order, argsort vs numpy's stable argsort
  # ---------------------------------------------------------------------------

  defp strided(tensor, layout) do
    rank = tuple_size(tensor.shape)

    case layout do
      :contiguous ->
        {tensor, :contiguous}

      :transposed when rank >= 2 ->
        perm = Enum.reverse(0..(rank - 1))
        {wrap(Native.transpose(tensor.data.ref, Enum.to_list(perm))), {:transpose, perm}}

      _ ->
        shape = Tuple.to_list(tensor.shape)
        starts = Enum.map(shape, fn d -> if d > 1, do: 1, else: 0 end)
        strides = Enum.map(shape, fn _ -> 2 end)
        {wrap(Native.slice(tensor.data.ref, starts, shape, strides)), {:slice, starts}}
    end
  end

  defp random_values(n, type, ties?) do
    for _ <- 1..n do
      cond do
        ties? and type in [:u8, :u16, :u32, :u64] -> :rand.uniform(5)
        ties? -> :rand.uniform(5) - 3
        type in [:f16, :bf16, :f32, :f64] -> Float.round(:rand.normal() * 10, 3)
        type in [:u8, :u16, :u32, :u64] -> :rand.uniform(250)
        true -> :rand.uniform(2001) - 1001
      end
    end
  end

  defp flat(tensor), do: Nx.to_flat_list(tensor)

  defp as_f64(list), do: Enum.map(list, fn v -> if is_number(v), do: v * 1.0, else: v end)

  test "argsort and sort match numpy's stable sort on every real type and layout" do
    :rand.seed(:exsss, {11, 22, 33})
    types = [:u8, :u16, :u32, :u64, :s8, :s16, :s32, :s64, :f16, :bf16, :f32, :f64]

    cases =
      for {type, i} <- Enum.with_index(Enum.flat_map(types, &[&1, &1, &1])) do
        rank = rem(i, 3) + 1
        shape = for _ <- 1..rank, do: :rand.uniform(if(rank == 1, do: 90, else: 7))
        n = Enum.product(shape)

        x =
          t(random_values(n, type, rem(i, 2) == 0), type: type)
          |> Nx.reshape(List.to_tuple(shape))

        layout = Enum.at([:contiguous, :transposed, :sliced], rem(div(i, 3), 3))
        {x, how} = strided(x, layout)
        axis = :rand.uniform(tuple_size(x.shape)) - 1
        dir = if rem(i, 4) < 2, do: :asc, else: :desc
        %{name: "x#{i}", x: x, how: how, axis: axis, dir: dir, i: i}
      end

    inputs =
      for c <- cases, into: %{} do
        # Send the (rounded) values of the strided view, contiguous.
        {String.to_atom(c.name), {as_f64(flat(c.x)), c.x.shape}}
      end

    code =
      Enum.map_join(cases, "\n", fn c ->
        key =
          if c.dir == :asc,
            do: "#{c.name}",
            else: "-np.unique(#{c.name}.ravel(), return_inverse=True)[1].reshape(#{c.name}.shape)"

        "out['i#{c.i}'] = np.argsort(#{key}, axis=#{c.axis}, kind='stable')\n" <>
          "out['s#{c.i}'] = np.sort(#{c.name}, axis=#{c.axis})" <>
          if(c.dir == :desc,
            do:
              "[tuple(slice(None, None, -1) if d == #{c.axis} else slice(None) for d in range(#{c.name}.ndim))]",
            else: ""
          )
      end)

    ref = EmilyTest.Numpy.run(code, Map.to_list(inputs))

    for c <- cases do
      {_, want_idx} = ref["i#{c.i}"]
      {_, want_sorted} = ref["s#{c.i}"]
      got_idx = flat(Nx.argsort(c.x, axis: c.axis, direction: c.dir))

      assert got_idx == Enum.map(want_idx, &trunc/1),
             "argsort case #{c.i} #{inspect(c.x.type)} #{c.dir}"

      got = flat(Nx.sort(c.x, axis: c.axis, direction: c.dir)) |> as_f64()
      assert got == want_sorted, "sort case #{c.i}"
    end
  end

  test "sort puts NaN last ascending and first descending, on every float type" do
    for type <- [:f16, :bf16, :f32, :f64] do
      x = t([1.0, :nan, :neg_infinity, -0.0, :infinity, :nan, -2.5], type: type)
      assert flat(Nx.sort(x)) == [:neg_infinity, -2.5, -0.0, 1.0, :infinity, :nan, :nan]

      assert flat(Nx.sort(x, direction: :desc)) == [
               :nan,
               :nan,
               :infinity,
               1.0,
               -0.0,
               -2.5,
               :neg_infinity
             ]

      assert flat(Nx.argsort(x)) == [2, 6, 3, 0, 4, 1, 5]
      assert flat(Nx.argsort(x, direction: :desc)) == [1, 5, 4, 0, 3, 6, 2]
    end
  end

  test "long rows sort stably (radix path) with many ties" do
    :rand.seed(:exsss, {1, 2, 3})
    vals = for _ <- 1..5000, do: :rand.uniform(7)
    x = t(vals)
    idx = flat(Nx.argsort(x))

    expected =
      vals |> Enum.with_index() |> Enum.sort_by(fn {v, i} -> {v, i} end) |> Enum.map(&elem(&1, 1))

    assert idx == expected
    idx_desc = flat(Nx.argsort(x, direction: :desc))

    expected_desc =
      vals
      |> Enum.with_index()
      |> Enum.sort_by(fn {v, i} -> {-v, i} end)
      |> Enum.map(&elem(&1, 1))

    assert idx_desc == expected_desc
  end

  # ---------------------------------------------------------------------------
  # Property tests against numpy float64
  # ---------------------------------------------------------------------------

  @tol %{{:f, 16} => 1.0e-2, {:bf, 16} => 6.0e-2, {:f, 32} => 2.0e-5, {:f, 64} => 1.0e-12}

  test "sum/mean/variance/std/median/logsumexp/product/max/min vs numpy, random axes, dtypes and layouts" do
    :rand.seed(:exsss, {5, 6, 7})
    types = [:f32, :f64, :f16, :bf16, :s32, :u8, :s8, :s64]

    cases =
      for i <- 0..95 do
        type = Enum.at(types, rem(i, length(types)))
        rank = rem(i, 4) + 1
        shape = for _ <- 1..rank, do: :rand.uniform(6)
        n = Enum.product(shape)

        values =
          if type in [:f32, :f64, :f16, :bf16],
            do: for(_ <- 1..n, do: :rand.normal()),
            else: for(_ <- 1..n, do: :rand.uniform(100) - if(type == :u8, do: 1, else: 50))

        x = t(values, type: type) |> Nx.reshape(List.to_tuple(shape))
        layout = Enum.at([:contiguous, :transposed, :sliced], rem(div(i, 4), 3))
        {x, _} = strided(x, layout)
        r = tuple_size(x.shape)

        axes =
          case rem(i, 3) do
            0 -> nil
            1 -> [:rand.uniform(r) - 1 - if(:rand.uniform(2) == 1, do: r, else: 0)]
            2 -> Enum.take_random(0..(r - 1), :rand.uniform(r))
          end

        keep = rem(i, 5) == 0
        %{i: i, x: x, axes: axes, keep: keep, ddof: rem(i, 2)}
      end

    inputs = for c <- cases, do: {String.to_atom("x#{c.i}"), {as_f64(flat(c.x)), c.x.shape}}

    np_axes = fn
      nil -> "None"
      axes -> "(" <> Enum.map_join(axes, "", &"#{&1},") <> ")"
    end

    code =
      Enum.map_join(cases, "\n", fn c ->
        x = "x#{c.i}"
        a = np_axes.(c.axes)
        k = if c.keep, do: "True", else: "False"
        axis1 = if c.axes, do: hd(c.axes), else: "None"

        """
        out['sum#{c.i}'] = np.sum(#{x}, axis=#{a}, keepdims=#{k})
        out['prod#{c.i}'] = np.prod(#{x} if #{x}.dtype.kind == 'f' else #{x}, axis=#{a}, keepdims=#{k})
        out['mean#{c.i}'] = np.mean(#{x}, axis=#{a}, keepdims=#{k})
        out['var#{c.i}'] = np.var(#{x}, axis=#{a}, keepdims=#{k}, ddof=#{c.ddof})
        out['std#{c.i}'] = np.std(#{x}, axis=#{a}, keepdims=#{k}, ddof=#{c.ddof})
        out['max#{c.i}'] = np.max(#{x}, axis=#{a}, keepdims=#{k})
        out['min#{c.i}'] = np.min(#{x}, axis=#{a}, keepdims=#{k})
        m = np.max(#{x}, axis=#{a}, keepdims=True)
        out['lse#{c.i}'] = np.log(np.sum(np.exp(#{x} - m), axis=#{a}, keepdims=#{k})) + (m if #{k} else np.squeeze(m, axis=#{a}))
        out['med#{c.i}'] = np.median(#{x}, axis=#{axis1})
        """
      end)

    ref = EmilyTest.Numpy.run(code, inputs)

    for c <- cases do
      x = c.x
      type = x.type
      opts = [axes: c.axes, keep_axes: c.keep]
      float_type = if Nx.Type.float?(type), do: type, else: {:f, 32}
      tol = @tol[float_type]
      ctx = "case #{c.i} #{inspect(type)} #{inspect(x.shape)} #{inspect(opts)}"

      exact = not Nx.Type.float?(type)
      check(Nx.sum(x, opts), ref["sum#{c.i}"], if(exact, do: 0.0, else: tol), ctx <> " sum")
      check(Nx.reduce_max(x, opts), ref["max#{c.i}"], 0.0, ctx <> " max")
      check(Nx.reduce_min(x, opts), ref["min#{c.i}"], 0.0, ctx <> " min")
      check(Nx.mean(x, opts), ref["mean#{c.i}"], tol, ctx <> " mean")
      n = reduced(x, c.axes)

      if n - c.ddof > 0 do
        check(Nx.variance(x, opts ++ [ddof: c.ddof]), ref["var#{c.i}"], 4 * tol, ctx <> " var")

        check(
          Nx.standard_deviation(x, opts ++ [ddof: c.ddof]),
          ref["std#{c.i}"],
          4 * tol,
          ctx <> " std"
        )
      end

      # Nx's logsumexp subtracts the maximum in the input type: unsigned
      # inputs wrap (on every backend), so they are left out.
      unless match?({:u, _}, Nx.Type.normalize!(type)),
        do: check(Nx.logsumexp(x, opts), ref["lse#{c.i}"], tol, ctx <> " logsumexp")

      if Nx.Type.float?(type) do
        check(Nx.product(x, opts), ref["prod#{c.i}"], 4 * tol, ctx <> " product")
      end

      med = if c.axes, do: Nx.median(x, axis: hd(c.axes)), else: Nx.median(x)

      check(med, ref["med#{c.i}"], tol, ctx <> " median")
    end
  end

  defp reduced(x, nil), do: Enum.product(Tuple.to_list(x.shape))

  defp reduced(x, axes) do
    r = tuple_size(x.shape)
    Enum.reduce(axes, 1, fn a, acc -> acc * elem(x.shape, rem(a + r, r)) end)
  end

  defp check(got, {shape, want}, tol, ctx) do
    assert got.shape == shape, "#{ctx}: shape #{inspect(got.shape)} != #{inspect(shape)}"

    Enum.zip(flat(got), want)
    |> Enum.each(fn
      {g, w} when is_number(g) and is_number(w) ->
        assert abs(g - w) <= tol * (abs(w) + 1), "#{ctx}: got #{g}, want #{w}"

      {g, w} ->
        assert g == w, "#{ctx}: got #{inspect(g)}, want #{inspect(w)}"
    end)
  end
end
