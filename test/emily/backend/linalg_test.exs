defmodule Emily.Backend.LinAlgTest do
  use ExUnit.Case, async: true

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  alias EmilyTest.Numpy

  defp t(list, opts \\ []), do: Nx.tensor(list, opts)

  defp flat(%Nx.Tensor{} = x),
    do: x |> Nx.reshape({Nx.size(x)}) |> Nx.to_list() |> Enum.map(&re/1)

  defp re(%Complex{re: r}), do: r
  defp re(x), do: x

  defp assert_all_close(got, want, tol) do
    g = if is_list(got), do: got, else: flat(got)
    w = if is_list(want), do: want, else: flat(want)
    assert length(g) == length(w)
    scale = Enum.reduce(w, 1.0, &max(abs(&1), &2))

    Enum.zip(g, w)
    |> Enum.each(fn {a, b} ->
      assert abs(a - b) <= tol * scale, "#{inspect(g)}\nvs\n#{inspect(w)}"
    end)
  end

  defp rand(n, seed) do
    :rand.seed(:exsss, {seed, 3, 5})
    for _ <- 1..n, do: :rand.normal()
  end

  defp mat(vals, shape, type), do: vals |> t(type: type) |> Nx.reshape(shape)

  # Batched matrix product over the leading axes.
  defp mm(a, b) do
    r = Nx.rank(a)
    batch = Enum.to_list(0..(r - 3)//1)
    Nx.dot(a, [r - 1], batch, b, [r - 2], batch)
  end

  describe "numpy oracle (float64), every dtype, strided inputs" do
    test "factorizations and solvers reconstruct and match numpy.linalg" do
      a_vals = rand(2 * 4 * 4, 1)
      b_vals = rand(2 * 4 * 3, 2)
      r_vals = rand(5 * 3, 3)

      want =
        Numpy.run(
          """
          s = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
          out['chol'] = np.linalg.cholesky(s)
          out['det'] = np.linalg.det(a)
          out['inv'] = np.linalg.inv(a)
          out['solve'] = np.linalg.solve(a, b)
          out['tri'] = np.linalg.solve(np.tril(a), b)
          out['triT'] = np.linalg.solve(np.swapaxes(np.triu(a), -1, -2), b)
          out['eig'] = np.linalg.eigvalsh(s)[..., ::-1]
          out['sv'] = np.linalg.svd(r, compute_uv=False)
          out['pinv'] = np.linalg.pinv(r)
          out['inv_t'] = np.linalg.inv(np.swapaxes(a, -1, -2))
          out['s'] = s
          """,
          a: {a_vals, {2, 4, 4}},
          b: {b_vals, {2, 4, 3}},
          r: {r_vals, {5, 3}}
        )

      for type <- [:f32, :f64] do
        tol = if type == :f32, do: 1.0e-4, else: 1.0e-10
        a = mat(a_vals, {2, 4, 4}, type)
        b = mat(b_vals, {2, 4, 3}, type)
        r = mat(r_vals, {5, 3}, type)
        s = mat(elem(want["s"], 1), {2, 4, 4}, type)

        l = Nx.LinAlg.cholesky(s)
        assert l.type == Nx.Type.normalize!(type)
        assert_all_close(l, elem(want["chol"], 1), tol)
        assert_all_close(mm(l, Nx.LinAlg.adjoint(l)), s, tol)
        assert_all_close(Nx.LinAlg.determinant(a), elem(want["det"], 1), tol)
        assert_all_close(Nx.LinAlg.invert(a), elem(want["inv"], 1), tol)

        assert_all_close(
          Nx.LinAlg.invert(Nx.transpose(a, axes: [0, 2, 1])),
          elem(want["inv_t"], 1),
          tol
        )

        assert_all_close(Nx.LinAlg.solve(a, b), elem(want["solve"], 1), tol)
        assert_all_close(Nx.LinAlg.triangular_solve(a, b), elem(want["tri"], 1), tol)

        assert_all_close(
          Nx.LinAlg.triangular_solve(a, b, lower: false, transform_a: :transpose),
          elem(want["triT"], 1),
          tol
        )

        {w, v} = Nx.LinAlg.eigh(s)
        assert_all_close(w, elem(want["eig"], 1), tol)
        assert_all_close(mm(Nx.multiply(v, Nx.new_axis(w, 1)), Nx.LinAlg.adjoint(v)), s, tol)

        {u, sv, vt} = Nx.LinAlg.svd(r, full_matrices?: false)
        assert_all_close(sv, elem(want["sv"], 1), tol)
        assert_all_close(mm(Nx.multiply(u, sv), vt), r, tol)
        {u, _sv, vt} = Nx.LinAlg.svd(r)
        assert u.shape == {5, 5} and vt.shape == {3, 3}
        assert_all_close(Nx.LinAlg.pinv(r), elem(want["pinv"], 1), tol * 10)

        for mode <- [:reduced, :complete] do
          {q, rr} = Nx.LinAlg.qr(r, mode: mode)
          assert_all_close(mm(q, rr), r, tol)
        end

        {p, l, u} = Nx.LinAlg.lu(a)
        assert_all_close(mm(mm(p, l), u), a, tol)
      end
    end

    test "integer, f16 and bf16 inputs" do
      a = t([[4, 1], [1, 3]])
      assert Nx.LinAlg.cholesky(a).type == {:f, 32}
      h = Nx.LinAlg.cholesky(Nx.as_type(a, :f16))
      assert h.type == {:f, 16}
      assert_all_close(h, [2.0, 0.0, 0.5, 1.6583123951777], 1.0e-3)
      assert Nx.LinAlg.determinant(Nx.as_type(a, :f64)).type == {:f, 64}
      {q, _} = Nx.LinAlg.qr(Nx.as_type(a, :c128))
      assert q.type == {:c, 128}
    end
  end
end
