defmodule Emily.Backend.AdvancedTest do
  # Tests for covariance/3, diff/2, pad_outer/3, reduce/4, window_reduce/5,
  # Random.multivariate_normal/4 (+ the *_split arities) and
  # LinAlg.least_squares/3. Their doctests run in the modules' own test files.
  use ExUnit.Case, async: true

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  alias EmilyTest.Numpy

  defp t(list, opts \\ []), do: Nx.tensor(list, opts)

  defp close?(a, b, tol) when is_number(a) and is_number(b),
    do: abs(a - b) <= tol * (1 + abs(b))

  defp assert_close(list, ref, tol) do
    assert length(list) == length(ref)

    Enum.zip(list, ref)
    |> Enum.each(fn {a, b} -> assert close?(a, b, tol), "#{inspect(a)} vs #{inspect(b)}" end)
  end

  defp rand_list(n), do: for(_ <- 1..n, do: Float.round(:rand.normal() * 3, 4))

  describe "numpy float64" do
    test "covariance (batched, strided, ddof, explicit mean) and diff" do
      :rand.seed(:exsss, {5, 6, 7})
      cases = for i <- 1..6, do: {i, :rand.uniform(6) + 1, :rand.uniform(4)}

      inputs = for {i, n, d} <- cases, do: {:"x#{i}", {rand_list(2 * n * d), {2, n, d}}}

      code =
        Enum.map_join(cases, "\n", fn {i, _n, _d} ->
          "out['c#{i}'] = np.stack([np.cov(x#{i}[b], rowvar=False, ddof=#{rem(i, 2)}) for b in range(2)]).reshape(2, x#{i}.shape[2], x#{i}.shape[2])\n" <>
            "out['t#{i}'] = np.cov(np.swapaxes(x#{i}[0], 0, 1), rowvar=True, ddof=0).reshape(x#{i}.shape[2], x#{i}.shape[2])\n" <>
            "out['m#{i}'] = ((x#{i}[0] - 1.5).T @ (x#{i}[0] - 1.5)) / x#{i}.shape[1]\n" <>
            "out['d#{i}'] = np.diff(x#{i}, n=2, axis=1)"
        end)

      ref = Numpy.run(code, inputs)

      for {i, n, d} <- cases, type <- [:f32, :f64] do
        tol = if type == :f32, do: 1.0e-4, else: 1.0e-10
        {vals, shape} = inputs[:"x#{i}"]
        x = vals |> t(type: type) |> Nx.reshape(shape)
        {_, c} = ref["c#{i}"]
        assert_close(Nx.to_flat_list(Nx.covariance(x, ddof: rem(i, 2))), c, tol)

        # strided: the transposed {d, n} matrix of batch 0, transposed back
        xt =
          x
          |> Nx.slice([0, 0, 0], [1, n, d])
          |> Nx.reshape({n, d})
          |> Nx.transpose()
          |> Nx.transpose()

        {_, m} = ref["m#{i}"]
        assert_close(Nx.to_flat_list(Nx.covariance(xt, t(List.duplicate(1.5, d)))), m, tol)

        # covariance of the transposed view (variables are rows of x[0])
        xtt = x |> Nx.slice([0, 0, 0], [1, n, d]) |> Nx.reshape({n, d}) |> Nx.transpose()
        {_, tt} = ref["t#{i}"]
        assert_close(Nx.to_flat_list(Nx.covariance(Nx.transpose(xtt))), tt, tol)

        if n > 2 do
          {_, dd} = ref["d#{i}"]
          assert_close(Nx.to_flat_list(Nx.diff(x, order: 2, axis: 1)), dd, tol)
        end
      end
    end

    test "pad_outer modes match np.pad (wrap, reflect, symmetric, edge)" do
      :rand.seed(:exsss, {8, 9, 10})
      modes = [cyclic: "wrap", reflect: "reflect", mirror: "symmetric", replicate: "edge"]

      cases =
        for i <- 1..8 do
          dims = [:rand.uniform(4) + 1, :rand.uniform(5) + 1]
          # within one period (numpy's wrap differs beyond it; periodicity is checked below)
          pads = Enum.map(dims, fn d -> {:rand.uniform(d) - 1, :rand.uniform(d) - 1} end)
          {mode, np_mode} = Enum.at(modes, rem(i, 4))
          {i, dims, pads, mode, np_mode}
        end

      inputs =
        for {i, dims, _, _, _} <- cases,
            do: {:"x#{i}", {rand_list(Enum.product(dims)), List.to_tuple(dims)}}

      code =
        Enum.map_join(cases, "\n", fn {i, _, pads, _, np_mode} ->
          pw = Enum.map_join(pads, ",", fn {l, h} -> "(#{l},#{h})" end)
          "out['p#{i}'] = np.pad(x#{i}, (#{pw},), mode='#{np_mode}')"
        end)

      ref = Numpy.run(code, inputs)

      for {i, dims, pads, mode, _} <- cases, type <- [:f32, :f64, :s32] do
        {vals, shape} = inputs[:"x#{i}"]
        vals = if type == :s32, do: Enum.map(vals, &round(&1 * 10)), else: vals
        r_scale = if type == :s32, do: 10, else: 1
        _ = r_scale
        x = vals |> t(type: type) |> Nx.reshape(shape)
        # strided input as well: transpose twice
        xs = x |> Nx.transpose() |> Nx.transpose()
        out = Nx.pad_outer(xs, mode, pads)
        {ref_shape, r} = ref["p#{i}"]
        assert out.shape == ref_shape, "#{mode} #{inspect(dims)} #{inspect(pads)}"
        expected = if type == :s32, do: Enum.map(r, &round(&1 * 10)), else: r

        if type == :s32,
          do: assert(Nx.to_flat_list(out) == expected),
          else:
            assert_close(Nx.to_flat_list(out), expected, if(type == :f32, do: 1.0e-6, else: 0.0))
      end
    end

    test "pad_outer continues periodically past one period" do
      x = t([1, 2, 3])
      assert Nx.to_list(Nx.pad_outer(x, :cyclic, [{4, 4}])) == [3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1]
      assert Nx.to_list(Nx.pad_outer(x, :reflect, [{4, 4}])) == [1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3]
      assert Nx.to_list(Nx.pad_outer(x, :mirror, [{4, 4}])) == [3, 3, 2, 1, 1, 2, 3, 3, 2, 1, 1]
      assert Nx.to_list(Nx.pad_outer(t([7]), :reflect, [{2, 1}])) == [7, 7, 7, 7]
      assert Nx.pad_outer(t([1, 2], type: :u8), :replicate, [{1, 1}]).type == {:u, 8}
    end

    test "multivariate_normal: sample covariance approaches the target" do
      key = Nx.Random.key(7)
      cov = t([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]], type: :f64)
      mean = t([1.0, -2.0, 0.5], type: :f64)

      for method <- [:cholesky, :svd, :eigh] do
        {s, new_key} =
          Nx.Random.multivariate_normal(key, mean, cov, shape: {20_000}, method: method)

        assert s.shape == {20_000, 3}
        assert s.type == {:f, 64}
        assert new_key.shape == {2}
        assert_close(Nx.to_flat_list(Nx.mean(s, axes: [0])), [1.0, -2.0, 0.5], 0.05)
        assert_close(Nx.to_flat_list(Nx.covariance(s)), Nx.to_flat_list(cov), 0.06)
      end

      # split variant == second half of the split key
      {s, _} = Nx.Random.multivariate_normal(key, mean, cov)
      [_k0, k1] = key |> Nx.Random.split() |> Nx.to_list()
      s2 = Nx.Random.multivariate_normal_split(t(k1, type: :u32), mean, cov)
      assert Nx.to_list(s) == Nx.to_list(s2)

      assert Nx.Random.multivariate_normal_split(key, t([0, 0]), t([[1, 0], [0, 1]]),
               type: :f16,
               shape: {3, 2}
             ).shape ==
               {3, 2, 2}

      assert_raise ArgumentError, fn ->
        Nx.Random.multivariate_normal(key, t([0.0]), t([[1.0, 0.0], [0.0, 1.0]]))
      end

      assert_raise ArgumentError, fn ->
        Nx.Random.multivariate_normal(key, t([[0.0]]), t([[1.0]]))
      end

      assert_raise ArgumentError, fn ->
        Nx.Random.multivariate_normal(key, t([0.0]), t([[1.0]]), method: :qr)
      end

      assert_raise ArgumentError, fn ->
        Nx.Random.multivariate_normal(key, t([0.0]), t([[1.0]]), type: :s32)
      end
    end

    test "least_squares eps matches numpy lstsq with the same cut-off" do
      :rand.seed(:exsss, {3, 1, 4})
      a = rand_list(5 * 3)
      b = rand_list(5)

      ref =
        Numpy.run("out['x'] = np.linalg.pinv(a, rcond=1e-15) @ b", a: {a, {5, 3}}, b: {b, {5}})

      x =
        Nx.LinAlg.least_squares(a |> t(type: :f64) |> Nx.reshape({5, 3}), t(b, type: :f64),
          eps: 1.0e-12
        )

      assert_close(Nx.to_flat_list(x), elem(ref["x"], 1), 1.0e-9)
    end
  end

  describe "host paths agree with the engine reductions" do
    test "reduce == sum / reduce_max over random axes, dtypes and strided inputs" do
      :rand.seed(:exsss, {4, 4, 4})

      for type <- [:s8, :u8, :s32, :f32, :f64], keep <- [false, true] do
        x = Nx.iota({3, 4, 2}, type: type) |> Nx.transpose(axes: [2, 0, 1])
        axes = Enum.take_random([0, 1, 2], :rand.uniform(3))
        acc_type = Nx.sum(x).type
        r = Nx.reduce(x, 0, [axes: axes, keep_axes: keep, type: acc_type], &Nx.add/2)

        assert Nx.to_flat_list(r) == Nx.to_flat_list(Nx.sum(x, axes: axes, keep_axes: keep)),
               inspect({type, axes})

        assert r.shape == Nx.sum(x, axes: axes, keep_axes: keep).shape

        m =
          Nx.reduce(
            x,
            Nx.Constants.min_finite(type),
            [axes: axes, keep_axes: keep],
            &Nx.max/2
          )

        assert Nx.to_flat_list(m) ==
                 Nx.to_flat_list(Nx.reduce_max(x, axes: axes, keep_axes: keep))
      end

      c = t([Complex.new(1, 2), Complex.new(3, -1)])
      assert Nx.to_number(Nx.reduce(c, 0, &Nx.add/2)) == Nx.to_number(Nx.sum(c))
    end

    test "window_reduce == window_sum / window_max with random options" do
      :rand.seed(:exsss, {9, 9, 9})

      for i <- 1..10, type <- [:s32, :f32] do
        x =
          Nx.iota({5, 6}, type: type)
          |> Nx.multiply(if(rem(i, 2) == 0, do: -1, else: 1))
          |> Nx.transpose()

        window = {:rand.uniform(3), :rand.uniform(3)}
        strides = [:rand.uniform(2), :rand.uniform(2)]
        dil = [:rand.uniform(2), 1]
        padding = Enum.at([:valid, :same, [{1, 0}, {0, 2}]], rem(i, 3))
        opts = [strides: strides, padding: padding, window_dilations: dil]

        assert Nx.to_list(Nx.window_reduce(x, 0, window, opts, &Nx.add/2)) ==
                 Nx.to_list(Nx.window_sum(x, window, opts))

        low =
          if type == :f32,
            do: Nx.tensor(:neg_infinity),
            else: Nx.Constants.min_finite(type)

        assert Nx.to_list(Nx.window_reduce(x, low, window, opts, &Nx.max/2)) ==
                 Nx.to_list(Nx.window_max(x, window, opts))
      end
    end
  end
end
