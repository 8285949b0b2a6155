defmodule Emily.Backend.FFTTest do
  use ExUnit.Case, async: true

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  alias EmilyTest.Numpy

  defp rand_list(n, seed) do
    :rand.seed(:exsss, {seed, 7, 11})
    for _ <- 1..n, do: :rand.normal()
  end

  defp cplx(t), do: Nx.to_list(Nx.reshape(t, {Nx.size(t)})) |> Enum.map(&to_pair/1)
  defp to_pair(%Complex{re: re, im: im}), do: {re, im}
  defp to_pair(x) when is_float(x), do: {x, 0.0}
  defp to_pair({_, _} = p), do: p

  defp assert_close(got, want, tol) do
    want = Enum.map(want, &to_pair/1)

    scale =
      Enum.reduce(want, 1.0, fn {re, im}, acc -> max(acc, :math.sqrt(re * re + im * im)) end)

    Enum.zip(got, want)
    |> Enum.each(fn {{a, b}, {c, d}} ->
      err = :math.sqrt((a - c) * (a - c) + (b - d) * (b - d))
      assert err <= tol * scale, "#{inspect({a, b})} vs #{inspect({c, d})}"
    end)
  end

  test "fft/ifft/rfft/irfft of every length 1..40 and a few big ones against numpy, every dtype" do
    lengths = Enum.to_list(1..40) ++ [97, 128, 1000]

    inputs =
      for n <- lengths, into: %{} do
        {"x#{n}", {rand_list(2 * n, n), {2, n}}}
      end

    code =
      Enum.map_join(lengths, "\n", fn n ->
        "out['f#{n}'] = np.fft.fft(x#{n}); out['i#{n}'] = np.fft.ifft(x#{n}); " <>
          "out['r#{n}'] = np.fft.rfft(x#{n}); out['p#{n}'] = np.fft.fft(x#{n}, n=#{n + 3}); " <>
          "out['c#{n}'] = np.fft.fft(x#{n}, n=#{div(n + 1, 2)}); " <>
          "out['ir#{n}'] = np.fft.irfft(x#{n}, n=#{n})"
      end)

    want = Numpy.run(code, Enum.map(inputs, fn {k, v} -> {String.to_atom(k), v} end))

    for n <- lengths, type <- [:f32, :f64] do
      tol = if type == :f32, do: 1.0e-5, else: 1.0e-12
      {vals, shape} = inputs["x#{n}"]
      x = Nx.tensor(vals, type: type) |> Nx.reshape(shape)
      ctype = if type == :f32, do: {:c, 64}, else: {:c, 128}

      f = Nx.fft(x)
      assert f.type == ctype
      assert_close(cplx(f), elem(want["f#{n}"], 1), tol)
      assert_close(cplx(Nx.ifft(x)), elem(want["i#{n}"], 1), tol)
      assert_close(cplx(Nx.rfft(x)), elem(want["r#{n}"], 1), tol)
      assert_close(cplx(Nx.fft(x, length: n + 3)), elem(want["p#{n}"], 1), tol)
      assert_close(cplx(Nx.fft(x, length: div(n + 1, 2))), elem(want["c#{n}"], 1), tol)
      # complex input (c64/c128) gives the same as the real one
      assert_close(cplx(Nx.fft(Nx.as_type(x, ctype))), elem(want["f#{n}"], 1), tol)
      ir = Nx.irfft(Nx.as_type(x, ctype), length: n)
      assert ir.type == Nx.Type.normalize!(type)
      assert_close(cplx(ir), elem(want["ir#{n}"], 1), tol)
    end
  end

  test "integer, f16 and bf16 inputs become c64; f64 c128" do
    assert Nx.fft(Nx.tensor([1, 2, 3])).type == {:c, 64}
    assert Nx.fft(Nx.tensor([1, 2, 3], type: :f16)).type == {:c, 64}
    assert Nx.fft(Nx.tensor([1, 2, 3], type: :bf16)).type == {:c, 64}
    assert Nx.fft(Nx.tensor([1, 2, 3], type: :f64)).type == {:c, 128}
    assert Nx.irfft(Nx.tensor([1, 2, 3], type: :f64)).type == {:f, 64}
    assert Nx.irfft(Nx.tensor([1, 2, 3])).shape == {4}
  end

  test "axis, :power_of_two, fft2/ifft2 with lengths and axes, strided input" do
    vals = rand_list(3 * 4 * 5, 3)

    want =
      Numpy.run(
        """
        out['a0'] = np.fft.fft(x, axis=0)
        out['p2'] = np.fft.fft(x, n=8, axis=2)
        out['f2'] = np.fft.fft2(x)
        out['i2'] = np.fft.ifft2(x, s=(3, 6), axes=(0, 2))
        out['t'] = np.fft.fft(np.transpose(x, (0, 2, 1)))
        """,
        x: {vals, {3, 4, 5}}
      )

    x = Nx.tensor(vals, type: :f64) |> Nx.reshape({3, 4, 5})
    assert_close(cplx(Nx.fft(x, axis: 0)), elem(want["a0"], 1), 1.0e-12)
    assert_close(cplx(Nx.fft(x, axis: 2, length: :power_of_two)), elem(want["p2"], 1), 1.0e-12)
    assert_close(cplx(Nx.fft2(x)), elem(want["f2"], 1), 1.0e-12)
    assert_close(cplx(Nx.ifft2(x, lengths: [3, 6], axes: [0, 2])), elem(want["i2"], 1), 1.0e-12)
    xt = Nx.transpose(x, axes: [0, 2, 1])
    assert_close(cplx(Nx.fft(xt)), elem(want["t"], 1), 1.0e-12)
  end

  test "round trip of a large prime and power-of-two length" do
    for n <- [65_537, 131_072] do
      x = Nx.tensor(rand_list(n, n), type: :f64)
      back = x |> Nx.fft() |> Nx.ifft() |> Nx.real()
      err = Nx.subtract(back, x) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
      assert err < 1.0e-10
    end
  end
end
