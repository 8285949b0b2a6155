defmodule Emily.Backend.ConvTest do
  use ExUnit.Case, async: true

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  # float64 direct convolution with Nx semantics (loop over kernel offsets,
  # einsum over channels).
  @py_ref """
  def conv(x, k, strides, pad, idil, kdil, fg=1, bg=1):
      N, Cin = x.shape[:2]; O, Cg = k.shape[:2]; ns = x.ndim - 2
      dshape = [N, Cin] + [(d - 1) * idil[i] + 1 for i, d in enumerate(x.shape[2:])]
      xd = np.zeros(dshape, dtype=x.dtype)
      xd[(slice(None), slice(None)) + tuple(slice(None, None, idil[i]) for i in range(ns))] = x
      xp = np.pad(xd, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in pad])
      xp = xp[(slice(None), slice(None)) + tuple(slice(max(-lo, 0), xp.shape[2 + i] - max(-hi, 0)) for i, (lo, hi) in enumerate(pad))]
      ks = k.shape[2:]
      K = [(ks[i] - 1) * kdil[i] + 1 for i in range(ns)]
      outs = [(xp.shape[2 + i] - K[i]) // strides[i] + 1 for i in range(ns)]
      T = fg * bg; Og = O // T
      out = np.zeros([N // bg, O] + outs, dtype=np.result_type(x, k))
      for t in range(T):
          kt = k[t * Og:(t + 1) * Og]
          for n in range(N // bg):
              nb = n + (t * (N // bg) if bg > 1 else 0)
              c0 = t * Cg if fg > 1 else 0
              xi = xp[nb, c0:c0 + Cg]
              for kk in np.ndindex(*ks):
                  sl = tuple(slice(kk[i] * kdil[i], kk[i] * kdil[i] + (outs[i] - 1) * strides[i] + 1, strides[i]) for i in range(ns))
                  out[n, t * Og:(t + 1) * Og] += np.einsum('oc,c...->o...', kt[(slice(None), slice(None)) + kk], xi[(slice(None),) + sl])
      return out
  """

  defp flat(t), do: Nx.to_flat_list(t)

  defp close?(got, want, tol) do
    length(got) == length(want) and
      Enum.zip(got, want) |> Enum.all?(fn {a, b} -> abs(a - b) <= tol * (1 + abs(b)) end)
  end

  defp random_list(n), do: for(_ <- 1..n, do: :rand.normal())
  defp py_list(l), do: "[" <> Enum.map_join(l, ", ", &inspect/1) <> "]"
  defp py_pad(p), do: "[" <> Enum.map_join(p, ", ", fn {a, b} -> "(#{a}, #{b})" end) <> "]"

  defp random_case(i) do
    ns = Enum.random(1..3)
    {fg, bg} = Enum.random([{1, 1}, {1, 1}, {Enum.random(2..3), 1}, {1, Enum.random(2..3)}])
    n = Enum.random(1..2) * bg
    cg = Enum.random(1..3)
    c = cg * fg
    o = Enum.random(1..2) * fg * bg
    sp = for _ <- 1..ns, do: Enum.random(2..6)
    ks = for _ <- 1..ns, do: Enum.random(1..3)
    strides = for _ <- 1..ns, do: Enum.random(1..2)
    idil = for _ <- 1..ns, do: Enum.random(1..2)
    kdil = for _ <- 1..ns, do: Enum.random(1..2)

    pad =
      for {d, k, id, kd} <- Enum.zip([sp, ks, idil, kdil]) do
        lo = Enum.random(0..2)
        hi = Enum.random(0..2)
        need = (k - 1) * kd + 1 - ((d - 1) * id + 1 + lo + hi)
        {lo, hi + max(need, 0)}
      end

    %{
      i: i,
      x_shape: [n, c | sp],
      k_shape: [o, cg | ks],
      strides: strides,
      idil: idil,
      kdil: kdil,
      pad: pad,
      fg: fg,
      bg: bg
    }
  end

  test "random N-d convolutions with groups, dilations, strides and padding vs numpy float64" do
    :rand.seed(:exsss, {7, 8, 9})
    cases = for i <- 1..24, do: random_case(i)

    cases =
      Enum.map(cases, fn c ->
        Map.merge(c, %{
          x: random_list(Enum.product(c.x_shape)),
          k: random_list(Enum.product(c.k_shape))
        })
      end)

    code =
      @py_ref <>
        Enum.map_join(cases, "\n", fn c ->
          "out['c#{c.i}'] = conv(x#{c.i}, k#{c.i}, #{py_list(c.strides)}, #{py_pad(c.pad)}, " <>
            "#{py_list(c.idil)}, #{py_list(c.kdil)}, #{c.fg}, #{c.bg})"
        end)

    inputs =
      Enum.flat_map(cases, fn c ->
        [
          {:"x#{c.i}", {c.x, List.to_tuple(c.x_shape)}},
          {:"k#{c.i}", {c.k, List.to_tuple(c.k_shape)}}
        ]
      end)

    results = EmilyTest.Numpy.run(code, inputs)

    for c <- cases, type <- [:f32, :f64] do
      {want_shape, want} = results["c#{c.i}"]
      x = Nx.tensor(c.x, type: type) |> Nx.reshape(List.to_tuple(c.x_shape))
      k = Nx.tensor(c.k, type: type) |> Nx.reshape(List.to_tuple(c.k_shape))

      opts = [
        strides: c.strides,
        padding: c.pad,
        input_dilation: c.idil,
        kernel_dilation: c.kdil,
        feature_group_size: c.fg,
        batch_group_size: c.bg
      ]

      got = Nx.conv(x, k, opts)
      assert got.shape == want_shape, inspect(c)
      assert got.type == Nx.Type.normalize!(type)
      tol = if type == :f32, do: 1.0e-4, else: 1.0e-10
      assert close?(flat(got), want, tol), inspect(c)

      # channels-last input/output through permutations (strided views)
      rank = length(c.x_shape)
      perm = [0, rank - 1 | Enum.to_list(1..(rank - 2))]
      inv = perm |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))
      x_last = Nx.transpose(x, axes: inv)
      got2 = Nx.conv(x_last, k, opts ++ [input_permutation: perm, output_permutation: perm])
      assert got2.shape == Nx.transpose(got, axes: inv).shape
      assert close?(flat(Nx.transpose(got2, axes: perm)), want, tol)
    end
  end

  test ":same padding keeps the spatial size (with kernel dilation) and matches numpy" do
    x = random_list(2 * 3 * 7 * 6)
    k = random_list(4 * 3 * 3 * 2)

    code =
      @py_ref <>
        """
        out['a'] = conv(x, k, [1, 1], [(2, 2), (0, 1)], [1, 1], [2, 1])
        out['b'] = conv(x, k, [2, 3], [(1, 1), (0, 1)], [1, 1], [1, 1])
        """

    r = EmilyTest.Numpy.run(code, x: {x, {2, 3, 7, 6}}, k: {k, {4, 3, 3, 2}})
    xt = Nx.tensor(x, type: :f64) |> Nx.reshape({2, 3, 7, 6})
    kt = Nx.tensor(k, type: :f64) |> Nx.reshape({4, 3, 3, 2})
    a = Nx.conv(xt, kt, padding: :same, kernel_dilation: [2, 1])
    assert a.shape == {2, 4, 7, 6}
    assert close?(flat(a), elem(r["a"], 1), 1.0e-10)
    b = Nx.conv(xt, kt, padding: :same, strides: [2, 3])
    assert b.shape == elem(r["b"], 0)
    assert close?(flat(b), elem(r["b"], 1), 1.0e-10)
  end

  test "types: integers give f32, halves and complex keep their type" do
    x = Nx.iota({1, 2, 4}) |> Nx.as_type(:s32)
    k = Nx.tensor([[[1, -1], [2, 0]]])
    out = Nx.conv(x, k)
    assert out.type == {:f, 32}
    # x = [[0,1,2,3],[4,5,6,7]]; out[j] = x0[j] - x0[j+1] + 2*x1[j]
    assert flat(out) == [7.0, 9.0, 11.0]

    for type <- [:f16, :bf16] do
      out = Nx.conv(Nx.as_type(x, type), k)
      assert out.type == Nx.Type.normalize!(type)
      assert flat(out) == [7.0, 9.0, 11.0]
    end

    z = Nx.tensor([[[Complex.new(1.0, 1.0), Complex.new(0.0, 2.0)]]])
    kz = Nx.tensor([[[Complex.new(0.0, 1.0)]]])
    out = Nx.conv(z, kz)
    assert out.type == {:c, 64}
    # no conjugation: (1+i)*i = -1+i, 2i*i = -2
    assert flat(out) == [Complex.new(-1.0, 1.0), Complex.new(-2.0, 0.0)]
    assert Nx.conv(Nx.as_type(x, :f32), Nx.as_type(k, :f64)).type == {:f, 64}
  end

  test "kernel permutation" do
    x = Nx.iota({1, 2, 5}, type: :f32)
    k = Nx.iota({3, 2, 2}, type: :f32)
    # kernel stored as {k, in, out}
    k_perm = Nx.transpose(k, axes: [2, 1, 0])
    want = Nx.conv(x, k) |> flat()
    assert Nx.conv(x, k_perm, kernel_permutation: [2, 1, 0]) |> flat() == want
  end

  test "errors" do
    x = Nx.iota({1, 4, 5}, type: :f32)
    k = Nx.iota({2, 3, 2}, type: :f32)
    assert_raise ArgumentError, ~r/input channels/, fn -> Nx.conv(x, k) end
    assert_raise ArgumentError, ~r/at least rank 3/, fn -> Nx.conv(Nx.iota({4, 5}), k) end
    assert_raise ArgumentError, ~r/unknown key/, fn -> Nx.conv(x, k, groups: 2) end
    k4 = Nx.iota({2, 4, 2}, type: :f32)
    assert_raise ArgumentError, ~r/empty tensor/, fn -> Nx.conv(x, k4, kernel_dilation: 5) end
    assert_raise ArgumentError, ~r/rank of strides/, fn -> Nx.conv(x, k4, strides: [1, 1]) end

    assert_raise ArgumentError, ~r/either batch groups/, fn ->
      Nx.conv(x, k4, feature_group_size: 2, batch_group_size: 2)
    end

    assert_raise ArgumentError, ~r/padding/, fn -> Nx.conv(x, k4, padding: [{1, 1}, {0, 0}]) end
  end
end
